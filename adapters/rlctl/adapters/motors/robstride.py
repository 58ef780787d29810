"""Robstride motors on a CAN bus through python-can: the `MotorBus` port, as LeRobot 0.6.1's
`RobstrideMotorsBus` drives them (MIT mode, positions in degrees, per-motor kp/kd gains; a motor
switched to velocity mode takes `Goal_Velocity` in degrees per second).

The frames are LeRobot's byte for byte (`robstride_protocol`). Unlike LeRobot's bus, a motor that
does not answer is never papered over with its last known state: each exchange is retried
(`retries`), then fails with a `HardwareError` naming the motor, its CAN id and the bus. A frame
that is short counts as no answer; a motor answering with a fault frame fails at once with its
fault bits. The handshake is LeRobot's state query (a fault clear, which moves nothing).

Robstride motors keep no calibration besides their zero (`set_zero_position`): positions are
degrees from it whatever `normalize` says, and a calibration written here is only kept in
memory, as in LeRobot. Ids are set with Robstride's MotorStudio, so discovery is not offered.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import can
import structlog

from rlctl.adapters.motors import robstride_protocol as rs
from rlctl.domain.calibration import Calibration
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

MotorValue = int | float

STATE_REGISTERS = {
    "Present_Position": "position",
    "Present_Velocity": "velocity",
    "Present_Torque": "torque",
    "Temperature_MOS": "temp_mos",
}
GAIN_REGISTERS = ("Kp", "Kd")
DEFAULT_GAINS = {"Kp": 10.0, "Kd": 0.5}  # LeRobot's defaults until a robot sets its own


class RobstrideMotorBus:
    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        *,
        interface: str = "auto",
        bitrate: int = 1_000_000,
        recv_ids: Mapping[str, int] | None = None,
        timeout_s: float = 0.01,
        retries: int = 2,
    ) -> None:
        """`port`: the CAN channel (`can0`; a serial device with `slcan`); `interface`:
        python-can's interface (`socketcan`, `slcan`, `virtual`, or `auto`: slcan for a /dev
        path, socketcan otherwise); `recv_ids`: the id each motor puts first in its answers
        (default: its id); `timeout_s`: how long the answers to one exchange may take."""
        where = f"CAN bus {port}"
        if retries < 0:
            raise InvalidInput(f"retries must be >= 0, got {retries}", where=where)
        if timeout_s <= 0:
            raise InvalidInput(f"timeout_s must be > 0, got {timeout_s}", where=where)
        self._port = port
        self._motors = dict(motors)
        unknown = sorted(
            {m.model for m in self._motors.values() if m.model.lower() not in rs.MODEL_LIMITS}
        )
        if unknown:
            raise InvalidInput(
                f"unknown Robstride motor model(s) {', '.join(unknown)}",
                where=where,
                hint=f"known models: {', '.join(m.upper() for m in rs.MODEL_LIMITS)}",
            )
        extra = set(recv_ids or {}) - set(self._motors)
        if extra:
            raise InvalidInput(
                f"recv_ids names motors the bus does not have: {', '.join(sorted(extra))}",
                where=where,
            )
        self._recv = {
            name: (recv_ids or {}).get(name, motor.id) for name, motor in self._motors.items()
        }
        for name, recv in self._recv.items():
            if not 0 <= recv <= 0xFF:
                raise InvalidInput(
                    f"the receive id of {name!r} is {recv}: it is one byte (0..255)", where=where
                )
        self._check_unique_ids()
        self.calibration = calibration
        self._interface = interface
        self._bitrate = bitrate
        self._timeout = timeout_s
        self._retries = retries
        self._can: Any = None
        self._gains = {name: dict(DEFAULT_GAINS) for name in self._motors}
        self._modes = dict.fromkeys(self._motors, rs.MODE_MIT)
        self._states: dict[str, rs.MotorState] = {}

    # Description

    @property
    def port(self) -> str:
        return self._port

    @property
    def motors(self) -> Mapping[str, Motor]:
        return dict(self._motors)

    @property
    def is_connected(self) -> bool:
        return self._can is not None

    @property
    def baudrate(self) -> int:
        return self._bitrate

    @property
    def where(self) -> str:
        return f"CAN bus {self._port}"

    def recv_id(self, motor: str) -> int:
        return self._recv[self._name(motor)]

    def mode(self, motor: str) -> int:
        return self._modes[self._name(motor)]

    def last_state(self, motor: str) -> rs.MotorState | None:
        """The state the motor last reported (any exchange updates it)."""
        return self._states.get(motor)

    # Life cycle

    def connect(self, *, handshake: bool = True) -> None:
        if self._can is not None:
            raise HardwareError("the CAN bus is already connected", where=self.where)
        interface = self._interface
        if interface == "auto":
            interface = "slcan" if self._port.startswith("/dev/") else "socketcan"
        try:
            self._can = can.Bus(interface=interface, channel=self._port, bitrate=self._bitrate)
        except (can.CanError, OSError, ValueError, ImportError) as error:
            raise HardwareError(
                f"cannot open the CAN interface {self._port!r} with python-can's {interface!r} "
                f"interface: {error}",
                where=self.where,
                hint=(
                    f"check that it exists and is up (`ip link show {self._port}`); "
                    "`rlctl setup-can --mode=setup --use_fd=false "
                    f"--interfaces={self._port}` configures it"
                    if interface == "socketcan"
                    else "check the adapter's device path and the interface name"
                ),
            ) from error
        try:
            if handshake:
                self._handshake()
        except BaseException:
            self._shutdown()
            raise
        log.debug("CAN bus connected", port=self._port, interface=interface)

    def _handshake(self) -> None:
        self._drain()
        try:
            self._query(list(self._motors), action="a state query (handshake)")
        except HardwareError as error:
            raise HardwareError(
                error.message,
                where=error.where,
                hint=error.hint
                or "check the supply, the CAN wiring (CANH, CANL, GND, 120 Ω at both ends) "
                "and the motors' ids (Robstride's MotorStudio shows and sets them)",
            ) from error

    def disconnect(self, *, disable_torque: bool = True) -> None:
        if self._can is None:
            return
        try:
            if disable_torque:
                try:
                    self.disable_torque()
                except HardwareError as error:
                    log.warning("torque not disabled on disconnect", error=error.message)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._can is not None:
            try:
                self._can.shutdown()
            finally:
                self._can = None

    def set_baudrate(self, baudrate: int) -> None:
        raise NotSupported(
            "a CAN bus's bitrate is the interface's, not set per connection",
            where=self.where,
            hint=f"`rlctl setup-can --interfaces={self._port} --bitrate={baudrate}`",
        )

    # Registers

    def read(self, register: str, motor: str, *, normalize: bool = True) -> MotorValue:
        return self.sync_read(register, [motor], normalize=normalize)[self._name(motor)]

    def write(
        self, register: str, motor: str, value: MotorValue, *, normalize: bool = True
    ) -> None:
        self.sync_write(register, {motor: value}, normalize=normalize)

    def sync_read(
        self, register: str, motors: Sequence[str] | None = None, *, normalize: bool = True
    ) -> dict[str, MotorValue]:
        names = self._names(motors)
        if register in STATE_REGISTERS:
            self._require_connected()
            states = self._query(names, action=f"read {register}")
            field = STATE_REGISTERS[register]
            return {name: float(getattr(states[name], field)) for name in names}
        if register in GAIN_REGISTERS:
            return {name: self._gains[name][register] for name in names}
        raise self._unknown_register(register, readable=True)

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        names = self._names(list(values))
        if register in GAIN_REGISTERS:
            low, high = rs.KP_RANGE if register == "Kp" else rs.KD_RANGE
            for name in names:
                gain = _finite(values[name], f"{register} of {name!r}")
                if not low <= gain <= high:
                    raise InvalidInput(
                        f"{register} of {name!r} is {gain:g}, outside [{low:g}, {high:g}]",
                        where=self.where,
                    )
                self._gains[name][register] = gain
            return
        if register not in ("Goal_Position", "Goal_Velocity"):
            raise self._unknown_register(register, readable=False)
        self._require_connected()
        wanted = rs.MODE_MIT if register == "Goal_Position" else rs.MODE_VELOCITY
        frames = {}
        for name in names:
            if self._modes[name] != wanted:
                raise InvalidInput(
                    f"motor {name!r} is in {rs.MODE_NAMES[self._modes[name]]} mode: "
                    f"{register} needs {rs.MODE_NAMES[wanted]} mode",
                    where=self.where,
                    hint=f"switch it first (bus.switch_mode({wanted}, [{name!r}]))",
                )
            goal = _finite(values[name], f"the {register} of {name!r}")
            if register == "Goal_Position":
                gains = self._gains[name]
                data = rs.encode_mit(self._motors[name].model, gains["Kp"], gains["Kd"], goal, 0, 0)
            else:
                data = rs.encode_velocity(goal)
            frames[name] = data
        what = "an MIT position command" if wanted == rs.MODE_MIT else "a velocity command"
        self._exchange(frames, action=what)

    def enable_torque(self, motors: Iterable[str] | None = None) -> None:
        self._simple(motors, rs.CMD_ENABLE, "enable")

    def disable_torque(self, motors: Iterable[str] | None = None) -> None:
        self._simple(motors, rs.CMD_DISABLE, "disable")

    def set_zero_position(self, motors: Iterable[str] | None = None) -> None:
        """Make where each motor is now its zero (torque should be off)."""
        self._simple(motors, rs.CMD_SET_ZERO, "set zero")

    def switch_mode(self, mode: int, motors: Iterable[str] | None = None) -> None:
        """Switch motors to MIT (0), position-velocity (1) or velocity (2) control."""
        if mode not in rs.MODE_NAMES:
            raise InvalidInput(
                f"unknown Robstride control mode {mode}",
                where=self.where,
                hint="0: MIT, 1: position-velocity, 2: velocity",
            )
        self._require_connected()
        names = self._names(None if motors is None else list(motors))
        self._exchange(
            dict.fromkeys(names, rs.mode_command(mode)),
            action=f"a switch to {rs.MODE_NAMES[mode]} mode",
        )
        for name in names:
            self._modes[name] = mode

    def configure_motors(self) -> None:
        """LeRobot's configuration: every motor enabled, in MIT mode."""
        self.enable_torque()
        self.switch_mode(rs.MODE_MIT)

    def _simple(self, motors: Iterable[str] | None, command: int, action: str) -> None:
        self._require_connected()
        names = self._names(None if motors is None else list(motors))
        self._exchange(dict.fromkeys(names, rs.simple_command(command)), action=action)

    # Discovery: Robstride ids are set with Robstride's tools

    def ping(self, motor_id: int) -> int | None:
        raise self._no_discovery("ping")

    def scan(self) -> dict[int, int]:
        raise self._no_discovery("scan")

    def scan_baudrates(self, baudrates: Iterable[int] | None = None) -> dict[int, dict[int, int]]:
        raise self._no_discovery("scan bitrates")

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        raise NotSupported(
            "Robstride motors get their CAN ids from Robstride's MotorStudio, not from rlctl",
            where=self.where,
        )

    def _no_discovery(self, what: str) -> NotSupported:
        return NotSupported(
            f"cannot {what} a Robstride bus: its motors report no model",
            where=self.where,
            hint="name each motor's id and model in the robot's motor table",
        )

    # Calibration: the motors keep only their zero

    def read_calibration(self) -> Calibration:
        return self.calibration if self.calibration is not None else Calibration({})

    def write_calibration(self, calibration: Calibration) -> None:
        self.calibration = calibration

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        raise NotSupported(
            "Robstride motors keep no homing offsets or limits to reset",
            where=self.where,
            hint="their zero is set with set_zero_position (`rlctl calibrate` does it)",
        )

    def set_half_turn_homings(self, motors: Iterable[str] | None = None) -> dict[str, int]:
        """Robstride's equivalent: where the motors are becomes their zero (offsets are 0)."""
        names = self._names(None if motors is None else list(motors))
        self.set_zero_position(names)
        return dict.fromkeys(names, 0)

    # Exchanges

    def _query(self, names: list[str], *, action: str) -> dict[str, rs.MotorState]:
        return self._exchange(
            dict.fromkeys(names, rs.simple_command(rs.CMD_CLEAR_FAULT)), action=action
        )

    def _exchange(self, frames: Mapping[str, bytes], *, action: str) -> dict[str, rs.MotorState]:
        """Send each motor its frame, collect its feedback; resend to the silent ones."""
        states: dict[str, rs.MotorState] = {}
        malformed: dict[str, str] = {}
        pending = list(frames)
        for _ in range(self._retries + 1):
            self._drain()
            for name in pending:
                self._send(self._motors[name].id, frames[name], name, action)
            got = self._collect(pending, malformed, action)
            for name, state in got.items():
                states[name] = state
                self._states[name] = state
            pending = [name for name in pending if name not in got]
            if not pending:
                return states
        tries = self._retries + 1
        name = pending[0]
        others = f" (nor did {', '.join(repr(n) for n in pending[1:])})" if pending[1:] else ""
        after = f"after {tries} {'try' if tries == 1 else 'tries'}{others}"
        if name in malformed:
            raise HardwareError(
                f"motor {name!r} ({self._ids(name)}) answered {action} with {malformed[name]} "
                f"{after}",
                where=self.where,
                hint="check the CAN wiring and termination, and that no two motors share an id",
            )
        raise HardwareError(
            f"motor {name!r} ({self._ids(name)}) did not answer {action} {after}",
            where=self.where,
            hint="check that the motor is powered and cabled, that it is in MIT mode and that "
            "its id is the robot's (Robstride's MotorStudio shows and sets it)",
        )

    def _collect(
        self, names: list[str], malformed: dict[str, str], action: str
    ) -> dict[str, rs.MotorState]:
        # As LeRobot's: a frame is told apart by its first byte, whatever its arbitration id.
        by_recv = {self._recv[n]: n for n in names}
        got: dict[str, rs.MotorState] = {}
        deadline = time.monotonic() + self._timeout
        while len(got) < len(names):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            msg = self._can.recv(timeout=left)
            if msg is None:
                break
            data = bytes(msg.data)
            if not data or msg.is_extended_id:
                continue
            name = by_recv.get(data[0])
            if name is None or name in got:
                continue
            bits = rs.fault_bits(data)
            if bits is not None:
                raise HardwareError(
                    f"motor {name!r} ({self._ids(name)}) reports a fault (fault bits "
                    f"0x{bits:08X}) answering {action}",
                    where=self.where,
                    hint="disable the motor, remove the cause (load, supply, heat) and "
                    "power-cycle it; Robstride's manual and MotorStudio decode the bits",
                )
            try:
                got[name] = rs.decode_feedback(self._motors[name].model, data[0], data)
            except rs.MalformedFrame as error:
                malformed[name] = str(error)
        return got

    def _send(self, arbitration_id: int, data: bytes, name: str, action: str) -> None:
        msg = can.Message(arbitration_id=arbitration_id, data=data, is_extended_id=False)
        try:
            self._can.send(msg, timeout=self._timeout)
        except (can.CanError, OSError) as error:
            raise HardwareError(
                f"could not send {action} to motor {name!r} ({self._ids(name)}): {error}",
                where=self.where,
                hint=f"check that {self._port} is up (`ip link show {self._port}`) and that the "
                "bus is not in bus-off (a missing termination or a shorted pair)",
            ) from error

    def _drain(self) -> None:
        """Drop answers that came too late for the exchange they belonged to."""
        while self._can.recv(timeout=0) is not None:
            pass

    # Names

    def _require_connected(self) -> None:
        if self._can is None:
            raise HardwareError(
                "the CAN bus is not connected", where=self.where, hint="connect the robot first"
            )

    def _name(self, motor: str) -> str:
        if motor not in self._motors:
            raise InvalidInput(
                f"no motor {motor!r} on this bus (motors: {', '.join(self._motors)})",
                where=self.where,
            )
        return motor

    def _names(self, motors: Sequence[str] | None) -> list[str]:
        return list(self._motors) if motors is None else [self._name(m) for m in motors]

    def _ids(self, name: str) -> str:
        motor_id, recv = self._motors[name].id, self._recv[name]
        return f"CAN id 0x{motor_id:02X}" + (
            f", answers as 0x{recv:02X}" if recv != motor_id else ""
        )

    def _unknown_register(self, register: str, *, readable: bool) -> InvalidInput:
        known = (
            [*STATE_REGISTERS, *GAIN_REGISTERS]
            if readable
            else ["Goal_Position", "Goal_Velocity", *GAIN_REGISTERS]
        )
        return InvalidInput(
            f"Robstride motors have no {'readable' if readable else 'writable'} register "
            f"{register!r} here",
            where=self.where,
            hint=f"{'readable' if readable else 'writable'}: {', '.join(known)}",
        )

    def _check_unique_ids(self) -> None:
        for what, ids in (
            ("CAN id", {n: m.id for n, m in self._motors.items()}),
            ("receive id", self._recv),
        ):
            seen: dict[int, str] = {}
            for name, can_id in ids.items():
                if can_id in seen:
                    raise InvalidInput(
                        f"motors {seen[can_id]!r} and {name!r} share the {what} 0x{can_id:02X}",
                        where=self.where,
                        hint="every motor needs its own id",
                    )
                seen[can_id] = name


def _finite(value: MotorValue, what: str) -> float:
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidInput(f"{what} is {number}, not a finite number")
    return number
