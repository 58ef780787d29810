"""What the Feetech and Dynamixel buses share: motors and registers by name, positions in user
units through the calibration, discovery, and the calibration kept in the motors' EEPROM.

The exchanges themselves (retries, errors naming port, motor and register) are `SdkTransport`'s.
A subclass supplies the SDK objects and what the vendors do differently: how a broadcast ping is
answered, what status error bits mean, which registers torque and calibration involve.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, ClassVar

from rlctl.adapters.motors.sdk_transport import SdkTransport
from rlctl.adapters.motors.tables import MODELS, Family, Register, ServoModel, servo_model
from rlctl.domain.calibration import (
    Calibration,
    MotorCalibration,
    homing_offset_for,
    require_finite,
)
from rlctl.domain.errors import CalibrationError, HardwareError, InvalidInput
from rlctl.domain.motors import Motor

MotorValue = int | float

DEFAULT_BAUDRATE = 1_000_000
DEFAULT_RETRIES = 2
POSITION_REGISTERS = frozenset({"Goal_Position", "Present_Position"})
_MAX_ID = 252


class SerialServoBus(abc.ABC):
    family: ClassVar[Family]
    sdk: ClassVar[ModuleType]
    apply_drive_mode: ClassVar[bool]  # LeRobot mirrors ranges on Feetech only
    homing_offset_is_added: ClassVar[bool]  # Dynamixel: present = actual + offset
    broadcast_status_length: ClassVar[int]  # bytes of one ping status packet
    default_timeout_margin_ms: ClassVar[float]

    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        *,
        baudrate: int = DEFAULT_BAUDRATE,
        retries: int = DEFAULT_RETRIES,
        timeout_margin_ms: float | None = None,
        broadcast_window_ms: float | None = None,
        solo_reads: Iterable[str] = (),
    ) -> None:
        """`retries`: extra attempts after a lost or corrupt reply. `timeout_margin_ms`: how long
        past the bytes' transmission time a reply may take. `broadcast_window_ms`: how long a
        broadcast ping collects replies (default: the vendor SDK's window for 253 ids).
        `solo_reads`: motors a sync read asks one by one (the Hope JR arm's SM8512BL, as
        LeRobot reads it)."""
        if retries < 0:
            raise InvalidInput(f"retries must be >= 0, got {retries}")
        self._port = port
        self._motors = dict(motors)
        self._models = {name: servo_model(m.model, self.family) for name, m in motors.items()}
        self._check_unique_ids()
        self._solo_reads = frozenset(self._names(solo_reads))
        orders = {model.byteorder for model in self._models.values()}
        if len(orders) > 1:
            raise InvalidInput(
                "these motors speak different protocols, so one bus cannot serve them: "
                + ", ".join(f"{n} ({m.name})" for n, m in self._models.items()),
                where=port,
                hint="put Feetech's SCS (protocol 1) and STS/SMS (protocol 0) motors on "
                "separate buses",
            )
        self._byteorder = orders.pop() if orders else "little"
        self.calibration = calibration
        self._baudrate = baudrate
        self._broadcast_window_ms = broadcast_window_ms
        margin = self.default_timeout_margin_ms if timeout_margin_ms is None else timeout_margin_ms
        self._transport = SdkTransport(
            self.sdk,
            self._new_port_handler(port, margin),
            self._new_packet_handler(),
            retries=retries,
            describe_status=self._describe_status,
        )

    # What a vendor supplies

    @abc.abstractmethod
    def _new_port_handler(self, port: str, timeout_margin_ms: float) -> Any: ...

    @abc.abstractmethod
    def _new_packet_handler(self) -> Any: ...

    @abc.abstractmethod
    def _describe_status(self, error: int, motor_id: int) -> tuple[str, str] | None:
        """(cause, hint) for a status packet's error byte, None when it reports nothing."""

    @abc.abstractmethod
    def _broadcast_ping_packet(self) -> bytes: ...

    @abc.abstractmethod
    def _parse_ping_replies(self, data: bytes) -> dict[int, int | None]:
        """id -> model number (None when the reply does not carry it)."""

    @abc.abstractmethod
    def _torque_writes(self, enable: bool) -> list[tuple[str, int]]: ...

    @abc.abstractmethod
    def _drive_mode(self, motor: str) -> int: ...

    @abc.abstractmethod
    def configure_motors(self) -> None: ...

    # Description

    @property
    def port(self) -> str:
        return self._port

    @property
    def motors(self) -> Mapping[str, Motor]:
        return dict(self._motors)

    @property
    def is_connected(self) -> bool:
        return self._transport.is_open

    @property
    def baudrate(self) -> int:
        return self._transport.baudrate if self.is_connected else self._baudrate

    @property
    def retries(self) -> int:
        return self._transport.retries

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._port!r}, motors={list(self._motors)})"

    # Connection

    def connect(self, *, handshake: bool = True) -> None:
        if self.is_connected:
            return
        if not self._transport.open(self._baudrate):
            raise self._unsupported_baudrate(self._baudrate)
        if handshake:
            try:
                self._handshake()
            except Exception:
                self._transport.close()
                raise

    def disconnect(self, *, disable_torque: bool = True) -> None:
        if not self.is_connected:
            return
        try:
            if disable_torque:
                self.disable_torque()
        finally:
            self._transport.close()

    def set_baudrate(self, baudrate: int) -> None:
        self._baudrate = baudrate
        if self.is_connected and not self._transport.set_baudrate(baudrate):
            raise self._unsupported_baudrate(baudrate)

    def _handshake(self) -> None:
        missing, wrong = [], []
        for name, motor in self._motors.items():
            number = self.ping(motor.id)
            expected = self._models[name].model_number
            if number is None:
                missing.append(f"{name!r} (id {motor.id})")
            elif number != expected:
                wrong.append(f"{name!r} (id {motor.id}) is model number {number}, not {expected}")
        if missing or wrong:
            parts = ([f"no answer from {', '.join(missing)}"] if missing else []) + wrong
            raise HardwareError(
                f"motors missing at {self.baudrate} baud: {'; '.join(parts)}",
                where=self._port,
                hint="check power and cables; `rlctl setup-motors` gives each motor its id and "
                "baud rate, `rlctl find-port` finds the port",
            )

    # Registers

    def read(self, register: str, motor: str, *, normalize: bool = True) -> MotorValue:
        motor_id = self._motor(motor).id
        entry = self._models[motor].register(register)
        raw = self._transport.read(
            motor_id, entry.address, entry.size, motor=motor, action=f"read {register}"
        )
        return self._from_wire(motor, register, self._ordered(raw, entry.size), normalize)

    def write(
        self, register: str, motor: str, value: MotorValue, *, normalize: bool = True
    ) -> None:
        motor_id = self._motor(motor).id
        entry = self._models[motor].register(register)
        payload = self._to_wire(motor, register, value, normalize).to_bytes(
            entry.size, self._byteorder
        )
        self._transport.write(
            motor_id, entry.address, payload, motor=motor, action=f"write {register}"
        )

    def sync_read(
        self, register: str, motors: Sequence[str] | None = None, *, normalize: bool = True
    ) -> dict[str, MotorValue]:
        names = self._names(motors)
        solo = [name for name in names if name in self._solo_reads]
        if solo:
            synced = [name for name in names if name not in self._solo_reads]
            values = self.sync_read(register, synced, normalize=normalize) if synced else {}
            values.update({name: self.read(register, name, normalize=normalize) for name in solo})
            return {name: values[name] for name in names}
        entry = self._shared_register(register, names)
        by_id = {self._motors[name].id: name for name in names}
        raw = self._transport.sync_read(
            entry.address, entry.size, by_id, action=f"sync read {register}"
        )
        return {
            by_id[i]: self._from_wire(
                by_id[i], register, self._ordered(value, entry.size), normalize
            )
            for i, value in raw.items()
        }

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        names = self._names(values)
        entry = self._shared_register(register, names)
        payloads = {
            self._motors[name].id: self._to_wire(name, register, values[name], normalize).to_bytes(
                entry.size, self._byteorder
            )
            for name in names
        }
        self._transport.sync_write(
            entry.address,
            entry.size,
            payloads,
            names={self._motors[name].id: name for name in names},
            action=f"sync write {register}",
        )

    def enable_torque(self, motors: Iterable[str] | None = None) -> None:
        for name in self._names(motors):
            for register, value in self._torque_writes(True):
                self.write(register, name, value)

    def disable_torque(self, motors: Iterable[str] | None = None) -> None:
        for name in self._names(motors):
            for register, value in self._torque_writes(False):
                self.write(register, name, value)

    # Discovery

    def ping(self, motor_id: int) -> int | None:
        return self._transport.ping(motor_id)

    def scan(self) -> dict[int, int]:
        replies = self._transport.broadcast(
            self._broadcast_ping_packet(), self._broadcast_window_s()
        )
        found = self._parse_ping_replies(replies)
        numbers = {i: n if n is not None else self._model_number(i) for i, n in found.items()}
        return {i: n for i, n in sorted(numbers.items()) if n is not None}

    def scan_baudrates(self, baudrates: Iterable[int] | None = None) -> dict[int, dict[int, int]]:
        rates = list(baudrates) if baudrates is not None else self._family_baudrates()
        with self._transport.lock:
            original = self.baudrate
            found = {}
            try:
                for rate in rates:
                    self.set_baudrate(rate)
                    if ids := self.scan():
                        found[rate] = ids
            finally:
                self.set_baudrate(original)
            return found

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        target, model = self._motor(motor), self._models[motor]
        with self._transport.lock:
            bus_rate = self.baudrate
            rate, current_id = self._find_single_motor(motor, model, baudrates)
            self.set_baudrate(rate)
            try:
                for register, value in self._torque_writes(False):
                    self._write_by_id(current_id, model, register, value)
                self._write_by_id(current_id, model, "ID", target.id)
                self._write_by_id(target.id, model, "Baud_Rate", model.baudrates[bus_rate])
            finally:
                self.set_baudrate(bus_rate)

    def _find_single_motor(
        self, motor: str, model: ServoModel, baudrates: Iterable[int] | None
    ) -> tuple[int, int]:
        found = self.scan_baudrates(baudrates)
        answers = [(rate, i, number) for rate, ids in found.items() for i, number in ids.items()]
        if not answers:
            raise HardwareError(
                f"no motor answered at any baud rate while setting up {motor!r}",
                where=self._port,
                hint=f"connect the {model.name} motor for {motor!r} alone to the bus and power it",
            )
        if len(answers) > 1:
            seen = ", ".join(f"id {i} at {rate} baud" for rate, i, _ in answers)
            raise HardwareError(
                f"several motors answer ({seen}) while setting up {motor!r}",
                where=self._port,
                hint="connect only the motor being set up, then run it again",
            )
        ((rate, current_id, number),) = answers
        if number != model.model_number:
            raise HardwareError(
                f"the motor at id {current_id} is model number {number}, but {motor!r} is a "
                f"{model.name} ({model.model_number})",
                where=self._port,
                hint=f"connect the {model.name} motor meant for {motor!r}",
            )
        return rate, current_id

    # Calibration kept in EEPROM

    def read_calibration(self) -> Calibration:
        motors = {}
        for name, motor in self._motors.items():
            motors[name] = MotorCalibration(
                id=motor.id,
                drive_mode=self._drive_mode(name),
                homing_offset=int(self.read("Homing_Offset", name, normalize=False)),
                range_min=int(self.read("Min_Position_Limit", name, normalize=False)),
                range_max=int(self.read("Max_Position_Limit", name, normalize=False)),
            )
        return Calibration(motors)

    def write_calibration(self, calibration: Calibration) -> None:
        names = self._names(calibration)
        self.disable_torque(names)  # EEPROM takes writes only with torque off
        for name in names:
            entry = calibration[name]
            self.write("Homing_Offset", name, entry.homing_offset, normalize=False)
            self.write("Min_Position_Limit", name, entry.range_min, normalize=False)
            self.write("Max_Position_Limit", name, entry.range_max, normalize=False)
        self.calibration = calibration

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        names = self._names(motors)
        for name in names:
            full_turn = self._models[name].resolution - 1
            self.write("Homing_Offset", name, 0, normalize=False)
            self.write("Min_Position_Limit", name, 0, normalize=False)
            self.write("Max_Position_Limit", name, full_turn, normalize=False)
        if self.calibration is not None:
            kept = {k: v for k, v in self.calibration.motors.items() if k not in names}
            self.calibration = Calibration(kept) if kept else None

    def set_half_turn_homings(self, motors: Iterable[str] | None = None) -> dict[str, int]:
        names = self._names(motors)
        self.reset_calibration(names)
        positions = self.sync_read("Present_Position", names, normalize=False)
        offsets = {
            name: homing_offset_for(
                int(positions[name]),
                self._models[name].resolution,
                offset_is_added=self.homing_offset_is_added,
            )
            for name in names
        }
        for name, offset in offsets.items():
            self.write("Homing_Offset", name, offset, normalize=False)
        return offsets

    # Values

    def _to_wire(self, motor: str, register: str, value: MotorValue, normalize: bool) -> int:
        model = self._models[motor]
        if normalize and register in POSITION_REGISTERS:
            ticks = self._calibration().unnormalize(
                motor,
                float(value),
                self._motors[motor].norm_mode,
                model.resolution,
                apply_drive_mode=self.apply_drive_mode,
            )
        else:
            # truncation, as LeRobot writes raw values
            ticks = int(require_finite(value, motor=motor, register=register))
        size = model.register(register).size
        try:
            wire = model.to_wire(register, ticks)
        except InvalidInput as err:
            raise InvalidInput(err.message, where=f"{motor}.{register}") from err
        if not 0 <= wire < 1 << (8 * size):
            raise InvalidInput(
                f"{ticks} does not fit the {size}-byte register", where=f"{motor}.{register}"
            )
        return wire

    def _from_wire(self, motor: str, register: str, raw: int, normalize: bool) -> MotorValue:
        model = self._models[motor]
        value = model.from_wire(register, raw)
        if normalize and register in POSITION_REGISTERS:
            return self._calibration().normalize(
                motor,
                value,
                self._motors[motor].norm_mode,
                model.resolution,
                apply_drive_mode=self.apply_drive_mode,
            )
        return value

    def _ordered(self, little_endian: int, size: int) -> int:
        """A register's value from what the transport decoded little-endian."""
        if self._byteorder == "little":
            return little_endian
        return int.from_bytes(little_endian.to_bytes(size, "little"), self._byteorder)

    def _calibration(self) -> Calibration:
        if self.calibration is None:
            raise CalibrationError(
                "no calibration loaded, so positions cannot be normalised",
                where=self._port,
                hint="run `rlctl calibrate` for this robot, or pass normalize=False for raw ticks",
            )
        return self.calibration

    # By id, for motors not (yet) known by name

    def _write_by_id(self, motor_id: int, model: ServoModel, register: str, value: int) -> None:
        entry = model.register(register)
        payload = model.to_wire(register, value).to_bytes(entry.size, model.byteorder)
        self._transport.write(
            motor_id, entry.address, payload, motor=None, action=f"write {register}"
        )

    def _model_number(self, motor_id: int) -> int | None:
        entry = self._family_models()[0].register("Model_Number")
        try:
            number = self._transport.read(
                motor_id, entry.address, entry.size, motor=None, action="read Model_Number"
            )
            return self._ordered(number, entry.size)
        except HardwareError:
            return None

    def _broadcast_window_s(self) -> float:
        if self._broadcast_window_ms is not None:
            return self._broadcast_window_ms / 1000
        # The SDKs' window: every id's status packet in turn, plus 3 ms of slack per id.
        per_byte_ms = 10_000 / self.baudrate
        return (self.broadcast_status_length * _MAX_ID * per_byte_ms + 3 * _MAX_ID + 16) / 1000

    # Lookups

    def _motor(self, name: str) -> Motor:
        try:
            return self._motors[name]
        except KeyError:
            raise InvalidInput(
                f"no motor {name!r} on this bus",
                where=self._port,
                hint=f"motors: {', '.join(self._motors) or '(none)'}",
            ) from None

    def _names(self, motors: Iterable[str] | None) -> list[str]:
        if motors is None:
            return list(self._motors)
        names = [motors] if isinstance(motors, str) else list(motors)
        for name in names:
            self._motor(name)
        return names

    def _shared_register(self, register: str, names: Sequence[str]) -> Register:
        if not names:
            raise InvalidInput("no motors given", where=self._port)
        entries = {self._models[name].register(register) for name in names}
        if len(entries) > 1:
            raise InvalidInput(
                f"{register} sits at different addresses on these motors' models, so one sync "
                "instruction cannot serve them",
                where=self._port,
            )
        return entries.pop()

    def _check_unique_ids(self) -> None:
        seen: dict[int, str] = {}
        for name, motor in self._motors.items():
            if motor.id in seen:
                raise InvalidInput(
                    f"motors {seen[motor.id]!r} and {name!r} share id {motor.id}",
                    hint="give every motor of a bus its own id",
                )
            seen[motor.id] = name

    def _family_models(self) -> list[ServoModel]:
        return [m for m in MODELS.values() if m.family is self.family]

    def _family_baudrates(self) -> list[int]:
        models = list(self._models.values()) or self._family_models()
        return sorted({rate for model in models for rate in model.baudrates}, reverse=True)

    def _unsupported_baudrate(self, baudrate: int) -> InvalidInput:
        return InvalidInput(
            f"the {self.family} SDK does not support {baudrate} baud",
            where=self._port,
            hint=f"use one of {', '.join(map(str, self._family_baudrates()))}",
        )
