"""Motor calibration: ranges, homing offsets, drive modes and the raw-ticks <-> user-units maps.

The arithmetic is LeRobot 0.6.1's (`MotorsBus._normalize` / `_unnormalize`, the buses'
`_get_half_turn_homings`, `encoding_utils`), so a calibration file written by LeRobot drives a
motor to the same positions here. `Calibration` reads and writes the JSON LeRobot keeps per robot:

    {"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": 12, "range_min": 800, ...}, ...}
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from rlctl.domain.errors import CalibrationError, InvalidInput


class MotorNormMode(enum.StrEnum):
    """How positions are presented to the user (LeRobot's values)."""

    DEGREES = "degrees"
    RANGE_M100_100 = "range_m100_100"
    RANGE_0_100 = "range_0_100"


_FIELDS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")
_CALIBRATE_HINT = "run `rlctl calibrate` for this robot to record the motor ranges again"


@attrs.frozen
class MotorCalibration:
    id: int
    drive_mode: int
    homing_offset: int
    range_min: int
    range_max: int

    def to_data(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, motor: str) -> MotorCalibration:
        if not isinstance(data, Mapping):
            raise CalibrationError(
                f"expected a mapping with {', '.join(_FIELDS)}, got {type(data).__name__}",
                where=motor,
            )
        missing = [name for name in _FIELDS if name not in data]
        if missing:
            raise CalibrationError(
                f"calibration lacks {', '.join(missing)}", where=motor, hint=_CALIBRATE_HINT
            )
        values = {name: _integer(data[name], where=f"{motor}.{name}") for name in _FIELDS}
        return cls(**values)


def _integer(value: Any, *, where: str) -> int:
    # LeRobot writes integers; a float that is a whole number (hand-edited files) is accepted.
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise CalibrationError(f"expected an integer, got {value!r}", where=where)
    return int(value)


def check_range(calibration: MotorCalibration, *, motor: str | None = None) -> None:
    """A usable range has range_min < range_max (LeRobot divides by their difference)."""
    if calibration.range_min >= calibration.range_max:
        raise CalibrationError(
            f"range_min ({calibration.range_min}) must be below range_max "
            f"({calibration.range_max})",
            where=motor or f"motor id {calibration.id}",
            hint=_CALIBRATE_HINT,
        )


def _motors(value: Mapping[str, MotorCalibration]) -> dict[str, MotorCalibration]:
    return dict(value)


@attrs.frozen
class Calibration:
    """Motor name -> calibration, in the order the robot lists its motors."""

    motors: dict[str, MotorCalibration] = attrs.field(converter=_motors)

    def __attrs_post_init__(self) -> None:
        for name, motor in self.motors.items():
            check_range(motor, motor=name)

    def __getitem__(self, motor: str) -> MotorCalibration:
        try:
            return self.motors[motor]
        except KeyError:
            raise CalibrationError(
                f"no calibration for this motor (calibrated: {', '.join(self.motors) or 'none'})",
                where=motor,
                hint=_CALIBRATE_HINT,
            ) from None

    def __contains__(self, motor: object) -> bool:
        return motor in self.motors

    def __iter__(self) -> Iterator[str]:
        return iter(self.motors)

    def __len__(self) -> int:
        return len(self.motors)

    def require(self, motors: Iterable[str]) -> None:
        """Raise for the first motor of `motors` that has no calibration."""
        for motor in motors:
            self[motor]

    def normalize(
        self,
        motor: str,
        raw_ticks: float,
        mode: MotorNormMode,
        resolution: int,
        *,
        apply_drive_mode: bool = True,
    ) -> float:
        return normalize(
            raw_ticks, self[motor], mode, resolution, apply_drive_mode=apply_drive_mode, motor=motor
        )

    def unnormalize(
        self,
        motor: str,
        value: float,
        mode: MotorNormMode,
        resolution: int,
        *,
        apply_drive_mode: bool = True,
    ) -> int:
        return unnormalize(
            value, self[motor], mode, resolution, apply_drive_mode=apply_drive_mode, motor=motor
        )

    def to_data(self) -> dict[str, dict[str, int]]:
        return {name: motor.to_data() for name, motor in self.motors.items()}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Calibration:
        if not isinstance(data, Mapping):
            raise CalibrationError(
                f"a calibration maps motor names to their settings, got {type(data).__name__}"
            )
        return cls({name: MotorCalibration.from_data(d, motor=name) for name, d in data.items()})

    def to_json(self) -> str:
        return json.dumps(self.to_data(), indent=4)

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise CalibrationError(f"calibration is not valid JSON: {err}") from err
        return cls.from_data(data)


def normalize(
    raw_ticks: float,
    calib: MotorCalibration,
    mode: MotorNormMode,
    resolution: int,
    *,
    apply_drive_mode: bool = True,
    motor: str | None = None,
) -> float:
    """Raw encoder ticks -> user units.

    The ranges modes clamp to [range_min, range_max] first and, with drive mode set, mirror the
    result; DEGREES neither clamps nor mirrors and measures from the middle of the range.
    `apply_drive_mode` is the bus's switch (Feetech: on, Dynamixel: off in LeRobot).
    """
    check_range(calib, motor=motor)
    low, high = calib.range_min, calib.range_max
    inverted = apply_drive_mode and bool(calib.drive_mode)
    bounded = min(high, max(low, raw_ticks))
    if mode is MotorNormMode.RANGE_M100_100:
        norm = (((bounded - low) / (high - low)) * 200) - 100
        return -norm if inverted else norm
    if mode is MotorNormMode.RANGE_0_100:
        norm = ((bounded - low) / (high - low)) * 100
        return 100 - norm if inverted else norm
    if mode is MotorNormMode.DEGREES:
        middle = (low + high) / 2
        return (raw_ticks - middle) * 360 / (resolution - 1)
    raise InvalidInput(f"unknown motor normalisation mode {mode!r}", where=motor)


def unnormalize(
    value: float,
    calib: MotorCalibration,
    mode: MotorNormMode,
    resolution: int,
    *,
    apply_drive_mode: bool = True,
    motor: str | None = None,
) -> int:
    """User units -> raw ticks, truncated towards zero as LeRobot's `int(...)` does."""
    check_range(calib, motor=motor)
    value = require_finite(value, motor=motor)
    low, high = calib.range_min, calib.range_max
    inverted = apply_drive_mode and bool(calib.drive_mode)
    if mode is MotorNormMode.RANGE_M100_100:
        value = -value if inverted else value
        bounded = min(100.0, max(-100.0, value))
        return int(((bounded + 100) / 200) * (high - low) + low)
    if mode is MotorNormMode.RANGE_0_100:
        value = 100 - value if inverted else value
        bounded = min(100.0, max(0.0, value))
        return int((bounded / 100) * (high - low) + low)
    if mode is MotorNormMode.DEGREES:
        middle = (low + high) / 2
        ticks = require_finite((value * (resolution - 1) / 360) + middle, motor=motor)
        return int(ticks)
    raise InvalidInput(f"unknown motor normalisation mode {mode!r}", where=motor)


def user_range(
    calib: MotorCalibration, mode: MotorNormMode, resolution: int
) -> tuple[float, float]:
    """The calibrated range in user units: what `unnormalize` maps onto range_min..range_max.

    The ranges modes are -100..100 and 0..100 whatever the drive mode; DEGREES measures from the
    middle of the recorded range, so a joint reaches its ends at +-(range/2) in degrees."""
    check_range(calib)
    if mode is MotorNormMode.RANGE_M100_100:
        return -100.0, 100.0
    if mode is MotorNormMode.RANGE_0_100:
        return 0.0, 100.0
    if mode is MotorNormMode.DEGREES:
        middle = (calib.range_min + calib.range_max) / 2
        scale = 360 / (resolution - 1)
        low = (calib.range_min - middle) * scale
        high = (calib.range_max - middle) * scale
        # Rounding may map an end a hair outside the range once truncated to ticks: step in.
        # (The gap is a few ulps, so a few steps suffice.)
        for _ in range(64):
            if unnormalize(low, calib, mode, resolution) >= calib.range_min:
                break
            low = math.nextafter(low, math.inf)
        for _ in range(64):
            if unnormalize(high, calib, mode, resolution) <= calib.range_max:
                break
            high = math.nextafter(high, -math.inf)
        return low, high
    raise InvalidInput(f"unknown motor normalisation mode {mode!r}")


def require_finite(value: float, *, motor: str | None, register: str = "Goal_Position") -> float:
    """A value bound for a motor register is a finite number: NaN or infinity never becomes a
    bound chosen by accident (`int(nan)` fails, `max(-100, nan)` is -100)."""
    number = float(value)
    if not math.isfinite(number):
        raise InvalidInput(
            f"refusing to write {number} to {register}: a motor takes finite numbers only",
            where=motor,
            hint="the robot's action guard holds such actions; check the policy or teleoperator "
            "that produced it",
        )
    return number


def homing_offset_for(
    present_position: int, resolution: int, *, offset_is_added: bool = False
) -> int:
    """The homing offset that makes `present_position` read as half a turn (2047 of 4096).

    Feetech reports `present = actual - offset` (the default); Dynamixel reports
    `present = actual + offset`, for which pass `offset_is_added=True`.
    """
    half_turn = int((resolution - 1) / 2)
    if offset_is_added:
        return half_turn - present_position
    return present_position - half_turn


def encode_sign_magnitude(value: int, sign_bit: int) -> int:
    """Feetech's signed registers: bit `sign_bit` holds the sign, the bits below the magnitude."""
    max_magnitude = (1 << sign_bit) - 1
    magnitude = abs(value)
    if magnitude > max_magnitude:
        raise InvalidInput(
            f"magnitude {magnitude} exceeds {max_magnitude}, the most a sign bit at "
            f"{sign_bit} leaves room for"
        )
    sign = 1 if value < 0 else 0
    return (sign << sign_bit) | magnitude


def decode_sign_magnitude(encoded: int, sign_bit: int) -> int:
    magnitude = encoded & ((1 << sign_bit) - 1)
    return -magnitude if (encoded >> sign_bit) & 1 else magnitude


def encode_twos_complement(value: int, n_bytes: int) -> int:
    """Dynamixel's signed registers, as the unsigned integer written on the wire."""
    bits = n_bytes * 8
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise InvalidInput(f"{value} does not fit {n_bytes} signed bytes [{low}, {high}]")
    return value if value >= 0 else (1 << bits) + value


def decode_twos_complement(encoded: int, n_bytes: int) -> int:
    bits = n_bytes * 8
    return encoded - (1 << bits) if encoded & (1 << (bits - 1)) else encoded
