"""A motor bus in a dict, for use-case tests and dry runs.

Registers hold raw integers per motor; positions go through the calibration exactly as on a real
bus. While torque is on, Present_Position takes the value of Goal_Position at once; with torque
off, `move_by_hand` sets it. Every operation is logged in `calls`; `fail_next` makes the next
operation raise, `unplug` makes a motor stop answering.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rlctl.adapters.motors.tables import MODELS
from rlctl.domain.calibration import (
    Calibration,
    MotorCalibration,
    homing_offset_for,
    require_finite,
)
from rlctl.domain.errors import CalibrationError, HardwareError, InvalidInput
from rlctl.domain.motors import Motor

MotorValue = int | float
_POSITIONS = frozenset({"Goal_Position", "Present_Position"})
_RESOLUTION = 4096


class InMemoryMotorBus:
    def __init__(
        self,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        *,
        port: str = "memory://motors",
        baudrate: int = 1_000_000,
        apply_drive_mode: bool = True,
    ) -> None:
        self._port = port
        self._motors = dict(motors)
        self.calibration = calibration
        self.apply_drive_mode = apply_drive_mode
        self._baudrate = baudrate
        self._connected = False
        self.registers: dict[str, dict[str, int]] = {
            name: {
                "ID": motor.id,
                "Present_Position": _RESOLUTION // 2,
                "Goal_Position": _RESOLUTION // 2,
                "Torque_Enable": 0,
                "Homing_Offset": 0,
                "Min_Position_Limit": 0,
                "Max_Position_Limit": _RESOLUTION - 1,
                "Drive_Mode": 0,
            }
            for name, motor in motors.items()
        }
        self.calls: list[tuple[str, str, tuple[str, ...]]] = []
        self._failures: list[Exception] = []
        self._unplugged: set[str] = set()

    # Scripting

    def fail_next(self, error: Exception) -> None:
        """The next operation raises `error` (queue several for several operations)."""
        self._failures.append(error)

    def unplug(self, motor: str) -> None:
        self._unplugged.add(motor)

    def plug(self, motor: str) -> None:
        self._unplugged.discard(motor)

    def move_by_hand(self, motor: str, raw_ticks: int) -> None:
        self.registers[self._name(motor)]["Present_Position"] = raw_ticks

    # The port

    @property
    def port(self) -> str:
        return self._port

    @property
    def motors(self) -> Mapping[str, Motor]:
        return dict(self._motors)

    @property
    def is_connected(self) -> bool:
        return self._connected

    @property
    def baudrate(self) -> int:
        return self._baudrate

    def connect(self, *, handshake: bool = True) -> None:
        self._record("connect", "", ())
        if handshake and self._unplugged:
            raise HardwareError(
                f"motors missing: {', '.join(sorted(self._unplugged))}", where=self._port
            )
        self._connected = True

    def disconnect(self, *, disable_torque: bool = True) -> None:
        self._record("disconnect", "", ())
        if disable_torque:
            for values in self.registers.values():
                values["Torque_Enable"] = 0
        self._connected = False

    def set_baudrate(self, baudrate: int) -> None:
        self._baudrate = baudrate

    def read(self, register: str, motor: str, *, normalize: bool = True) -> MotorValue:
        return self.sync_read(register, [motor], normalize=normalize)[motor]

    def write(
        self, register: str, motor: str, value: MotorValue, *, normalize: bool = True
    ) -> None:
        self.sync_write(register, {motor: value}, normalize=normalize)

    def sync_read(
        self, register: str, motors: Sequence[str] | None = None, *, normalize: bool = True
    ) -> dict[str, MotorValue]:
        names = self._names(motors)
        self._record("read", register, tuple(names))
        return {name: self._present(name, register, normalize) for name in names}

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        names = self._names(values)
        self._record("write", register, tuple(names))
        for name in names:
            raw = self._raw(name, register, values[name], normalize)
            self.registers[name][register] = raw
            if register == "Torque_Enable" and raw:
                self.registers[name]["Goal_Position"] = self.registers[name]["Present_Position"]
            if register == "Goal_Position" and self.registers[name].get("Torque_Enable"):
                self.registers[name]["Present_Position"] = raw

    def enable_torque(self, motors: Iterable[str] | None = None) -> None:
        self.sync_write("Torque_Enable", dict.fromkeys(self._names(motors), 1))

    def disable_torque(self, motors: Iterable[str] | None = None) -> None:
        self.sync_write("Torque_Enable", dict.fromkeys(self._names(motors), 0))

    def configure_motors(self) -> None:
        self.disable_torque()

    def ping(self, motor_id: int) -> int | None:
        return self.scan().get(motor_id)

    def scan(self) -> dict[int, int]:
        self._record("scan", "", ())
        return {
            self.registers[name]["ID"]: MODELS[motor.model].model_number
            for name, motor in self._motors.items()
            if name not in self._unplugged and motor.model in MODELS
        }

    def scan_baudrates(self, baudrates: Iterable[int] | None = None) -> dict[int, dict[int, int]]:
        found = self.scan()
        rates = [self._baudrate] if baudrates is None else list(baudrates)
        return {self._baudrate: found} if found and self._baudrate in rates else {}

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        name = self._name(motor)
        self._record("setup_motor", "ID", (name,))
        self.registers[name]["ID"] = self._motors[name].id

    def read_calibration(self) -> Calibration:
        self._record("read_calibration", "", tuple(self._motors))
        return Calibration(
            {
                name: MotorCalibration(
                    id=motor.id,
                    drive_mode=self.registers[name]["Drive_Mode"],
                    homing_offset=self.registers[name]["Homing_Offset"],
                    range_min=self.registers[name]["Min_Position_Limit"],
                    range_max=self.registers[name]["Max_Position_Limit"],
                )
                for name, motor in self._motors.items()
            }
        )

    def write_calibration(self, calibration: Calibration) -> None:
        self._record("write_calibration", "", tuple(calibration))
        for name in calibration:
            entry = calibration[name]
            self.registers[self._name(name)].update(
                Homing_Offset=entry.homing_offset,
                Min_Position_Limit=entry.range_min,
                Max_Position_Limit=entry.range_max,
            )
        self.calibration = calibration

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        names = self._names(motors)
        self._record("reset_calibration", "", tuple(names))
        for name in names:
            self.registers[name].update(
                Homing_Offset=0, Min_Position_Limit=0, Max_Position_Limit=_RESOLUTION - 1
            )
        if self.calibration is not None:
            kept = {k: v for k, v in self.calibration.motors.items() if k not in names}
            self.calibration = Calibration(kept) if kept else None

    def set_half_turn_homings(self, motors: Iterable[str] | None = None) -> dict[str, int]:
        names = self._names(motors)
        self.reset_calibration(names)
        offsets = {
            name: homing_offset_for(self.registers[name]["Present_Position"], _RESOLUTION)
            for name in names
        }
        for name, offset in offsets.items():
            self.registers[name]["Homing_Offset"] = offset
            self.registers[name]["Present_Position"] -= offset
        return offsets

    # Internals

    def _record(self, operation: str, register: str, motors: tuple[str, ...]) -> None:
        self.calls.append((operation, register, motors))
        if self._failures:
            raise self._failures.pop(0)
        absent = [m for m in motors if m in self._unplugged]
        if absent:
            raise HardwareError(
                f"motor {absent[0]!r} sent no status packet for {operation} {register}",
                where=self._port,
                hint="plug the motor back in",
            )

    def _present(self, name: str, register: str, normalize: bool) -> MotorValue:
        raw = self.registers[name].get(register, 0)
        if not (normalize and register in _POSITIONS):
            return raw
        return self._require_calibration().normalize(
            name,
            raw,
            self._motors[name].norm_mode,
            _RESOLUTION,
            apply_drive_mode=self.apply_drive_mode,
        )

    def _raw(self, name: str, register: str, value: MotorValue, normalize: bool) -> int:
        if not (normalize and register in _POSITIONS):
            return int(require_finite(value, motor=name, register=register))
        return self._require_calibration().unnormalize(
            name,
            float(value),
            self._motors[name].norm_mode,
            _RESOLUTION,
            apply_drive_mode=self.apply_drive_mode,
        )

    def _require_calibration(self) -> Calibration:
        if self.calibration is None:
            raise CalibrationError(
                "no calibration loaded", where=self._port, hint="run `rlctl calibrate`"
            )
        return self.calibration

    def _name(self, motor: str) -> str:
        if motor not in self._motors:
            raise InvalidInput(f"no motor {motor!r} on this bus", where=self._port)
        return motor

    def _names(self, motors: Iterable[str] | None) -> list[str]:
        if motors is None:
            return list(self._motors)
        names = [motors] if isinstance(motors, str) else list(motors)
        return [self._name(name) for name in names]
