"""The Unitree G1 exoskeleton's joint sensors and their calibration, as LeRobot 0.6.1 reads them
(`teleoperators/unitree_g1/exo_calib.py`).

Each joint carries a magnet over two hall sensors: one ADC channel reads the sine of its angle,
the other the cosine. Because the magnet and the sensors sit imperfectly, the pair traces an
ellipse rather than a circle as the joint turns. Calibration fits that ellipse (its centre and a
2x2 map onto the unit circle) and records the angle read in the joint's zero pose; at run time
the angle is `-(atan2(z) - zero_offset)` of the point mapped onto the circle, in [-pi, pi].

The calibration file is LeRobot's JSON (`version`, `side`, `adc_max`, `joints: [{name,
center_fit, T, zero_offset}]`), so an arm calibrated by either tool is read by the other.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import CalibrationError, InvalidInput

ADC_MAX = 2**12 - 1  # the boards' 12-bit ADC
ADC_HALF = ADC_MAX / 2
CHANNELS = 16  # numbers per line a board prints
CALIBRATION_VERSION = 2

# The exoskeleton's joints and their (sine, cosine) channels in a board's line, in LeRobot's
# order (the order its calibration walks through them).
JOINT_CHANNELS: dict[str, tuple[int, int]] = {
    "shoulder_pitch": (0, 1),
    "shoulder_yaw": (2, 3),
    "shoulder_roll": (4, 5),
    "elbow_flex": (6, 7),
    "wrist_roll": (14, 15),
}
EXO_JOINTS = tuple(JOINT_CHANNELS)
SIDES = ("left", "right")


def normalize_angle(angle: float) -> float:
    """`angle` in [-pi, pi]."""
    return math.atan2(math.sin(angle), math.cos(angle))


def centered_point(raw: Sequence[int], joint: str) -> np.ndarray:
    """The joint's (cosine, sine) reading around the ADC's middle: the point on its ellipse."""
    sine, cosine = JOINT_CHANNELS[joint]
    return np.array([float(raw[cosine]) - ADC_HALF, float(raw[sine]) - ADC_HALF])


@attrs.frozen
class ExoJointCalibration:
    name: str
    center_fit: tuple[float, float]  # the ellipse's centre
    transform: tuple[tuple[float, float], tuple[float, float]]  # LeRobot's `T`: ellipse -> circle
    zero_offset: float = 0.0  # the angle (on the circle) read in the zero pose

    def circle_point(self, raw: Sequence[int]) -> np.ndarray:
        point = centered_point(raw, self.name) - np.asarray(self.center_fit)
        circle: np.ndarray = np.asarray(self.transform, dtype=float) @ point
        return circle

    def angle(self, raw: Sequence[int]) -> float:
        z = self.circle_point(raw)
        return normalize_angle(-(math.atan2(z[1], z[0]) - self.zero_offset))


@attrs.frozen
class ExoCalibration:
    """One arm's calibration (LeRobot's `ExoskeletonCalibration`)."""

    side: str
    joints: tuple[ExoJointCalibration, ...]
    version: int = CALIBRATION_VERSION
    adc_max: int = ADC_MAX

    def angles(self, raw: Sequence[int]) -> dict[str, float]:
        """The calibrated joints' angles (radians) from one line of readings."""
        if len(raw) < CHANNELS:
            raise InvalidInput(
                f"a reading has {len(raw)} channels, the exoskeleton's boards send {CHANNELS}",
                where=f"{self.side} exoskeleton arm",
            )
        return {joint.name: joint.angle(raw) for joint in self.joints}

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "side": self.side,
            "adc_max": self.adc_max,
            "joints": [
                {
                    "name": j.name,
                    "center_fit": list(j.center_fit),
                    "T": [list(row) for row in j.transform],
                    "zero_offset": j.zero_offset,
                }
                for j in self.joints
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "") -> ExoCalibration:
        """Read LeRobot's file content; anything malformed is one `CalibrationError`."""
        if not isinstance(data, Mapping):
            raise _bad("the file holds no JSON object", where)
        joints_data = data.get("joints", [])
        if not isinstance(joints_data, list):
            raise _bad("'joints' is not a list", where)
        joints = []
        for i, item in enumerate(joints_data):
            joints.append(_joint(item, f"joints[{i}]", where))
        names = [j.name for j in joints]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise _bad(f"joint(s) {', '.join(duplicated)} appear more than once", where)
        side = data.get("side", "")
        version = data.get("version", CALIBRATION_VERSION)
        adc_max = data.get("adc_max", ADC_MAX)
        if not isinstance(side, str):
            raise _bad(f"'side' is {side!r}, not a string", where)
        for key, value in (("version", version), ("adc_max", adc_max)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise _bad(f"{key!r} is {value!r}, not an integer", where)
        return cls(side=side, joints=tuple(joints), version=version, adc_max=adc_max)

    @classmethod
    def from_json(cls, text: str, *, where: str = "") -> ExoCalibration:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise _bad(f"not JSON ({error.msg}, line {error.lineno})", where) from error
        return cls.from_dict(data, where=where)

    def missing_joints(self) -> list[str]:
        have = {j.name for j in self.joints}
        return [name for name in EXO_JOINTS if name not in have]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _joint(item: Any, key: str, where: str) -> ExoJointCalibration:
    if not isinstance(item, Mapping):
        raise _bad(f"{key} is not an object", where)
    name = item.get("name")
    if name not in JOINT_CHANNELS:
        raise _bad(f"{key}.name is {name!r}; the joints are {', '.join(EXO_JOINTS)}", where)
    center = item.get("center_fit")
    if not isinstance(center, list) or len(center) != 2 or None in map(_number, center):
        raise _bad(f"{key} ({name}): center_fit must be 2 finite numbers, got {center!r}", where)
    matrix = item.get("T")
    rows_ok = (
        isinstance(matrix, list)
        and len(matrix) == 2
        and all(isinstance(r, list) and len(r) == 2 for r in matrix)
        and all(_number(v) is not None for r in matrix for v in r)
    )
    if not rows_ok:
        raise _bad(
            f"{key} ({name}): T must be a 2x2 matrix of finite numbers, got {matrix!r}", where
        )
    zero = _number(item.get("zero_offset", 0.0))
    if zero is None:
        raise _bad(f"{key} ({name}): zero_offset must be a finite number", where)
    c0, c1 = (float(v) for v in center)
    assert isinstance(matrix, list)  # checked above
    (a, b), (c, d) = ((float(v) for v in row) for row in matrix)
    return ExoJointCalibration(name, (c0, c1), ((a, b), (c, d)), zero)


def _bad(message: str, where: str) -> CalibrationError:
    return CalibrationError(
        f"the exoskeleton calibration is malformed: {message}",
        where=where or "exoskeleton calibration",
        hint="fix the file, or delete it and calibrate the arm again "
        "(`rlctl calibrate --teleop.type=unitree_g1 ...`)",
    )
