"""Damiao motors on a CAN bus through python-can: the `MotorBus` port, as LeRobot 0.6.1's
`DamiaoMotorsBus` drives them (MIT mode, positions in degrees, per-motor kp/kd gains).

Unlike LeRobot's, a motor that does not answer is never papered over with its last known state:
each exchange is retried (`retries`), then fails with a `HardwareError` naming the motor, its CAN
ids and the bus. A frame that is short or names another motor counts as no answer; a motor whose
status reports a fault (over-current, overload, …) fails at once with the fault named. The
handshake only queries (a refresh moves nothing and enables no torque) and checks each motor's
control mode and frame scales against its model, so a motor in another mode or configured for
another model is refused before it is sent a goal it would misread.

Damiao motors keep no calibration besides their zero (`set_zero_position`): positions are degrees
from it whatever `normalize` says, and a calibration written here is only kept in memory, as in
LeRobot. Ids are set with Damiao's own tools, so discovery and id setup are not offered.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import can
import structlog

from rlctl.adapters.motors import damiao_protocol as dm
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
    "Temperature_Rotor": "temp_rotor",
}
GAIN_REGISTERS = ("Kp", "Kd")
DEFAULT_GAINS = {"Kp": 10.0, "Kd": 0.5}  # LeRobot's defaults until a robot sets its own
RECV_OFFSET = 0x10  # the OpenArm's convention: a motor answers on its send id + 0x10
SCALE_PARAMS = ("PMAX", "VMAX", "TMAX")


class DamiaoMotorBus:
    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        *,
        interface: str = "socketcan",
        use_can_fd: bool = True,
        bitrate: int = 1_000_000,
        data_bitrate: int | None = 5_000_000,
        recv_ids: Mapping[str, int] | None = None,
        timeout_s: float = 0.01,
        retries: int = 2,
    ) -> None:
        """`port`: the CAN channel (`can0`; a serial device with `slcan`); `interface`:
        python-can's interface (`socketcan`, `slcan`, `virtual`, or `auto`: slcan for a /dev
        path, socketcan otherwise); `recv_ids`: each motor's answer id (default: its id +
        0x10); `timeout_s`: how long the answers to one exchange may take."""
        if retries < 0:
            raise InvalidInput(f"retries must be >= 0, got {retries}", where=f"CAN bus {port}")
        if timeout_s <= 0:
            raise InvalidInput(f"timeout_s must be > 0, got {timeout_s}", where=f"CAN bus {port}")
        self._port = port
        self._motors = dict(motors)
        unknown = sorted({m.model for m in self._motors.values()} - set(dm.MODEL_LIMITS))
        if unknown:
            raise InvalidInput(
                f"unknown Damiao motor model(s) {', '.join(unknown)}",
                where=f"CAN bus {port}",
                hint=f"known models: {', '.join(dm.MODEL_LIMITS)}",
            )
        extra = set(recv_ids or {}) - set(self._motors)
        if extra:
            raise InvalidInput(
                f"recv_ids names motors the bus does not have: {', '.join(sorted(extra))}",
                where=f"CAN bus {port}",
            )
        self._recv = {
            name: (recv_ids or {}).get(name, motor.id + RECV_OFFSET)
            for name, motor in self._motors.items()
        }
        self._check_unique_ids()
        self.calibration = calibration
        self._interface = interface
        self._fd = use_can_fd
        self._bitrate = bitrate
        self._data_bitrate = data_bitrate
        self._timeout = timeout_s
        self._retries = retries
        self._can: Any = None
        self._gains = {name: dict(DEFAULT_GAINS) for name in self._motors}
        self._states: dict[str, dm.MotorState] = {}

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

    def last_state(self, motor: str) -> dm.MotorState | None:
        """The state the motor last reported (any exchange updates it)."""
        return self._states.get(motor)

    # Life cycle

    def connect(self, *, handshake: bool = True) -> None:
        if self._can is not None:
            raise HardwareError("the CAN bus is already connected", where=self.where)
        interface = self._interface
        if interface == "auto":
            interface = "slcan" if self._port.startswith("/dev/") else "socketcan"
        kwargs: dict[str, Any] = {
            "interface": interface,
            "channel": self._port,
            "bitrate": self._bitrate,
        }
        if interface == "socketcan" and self._fd and self._data_bitrate is not None:
            kwargs.update(fd=True, data_bitrate=self._data_bitrate)
        try:
            self._can = can.Bus(**kwargs)
        except (can.CanError, OSError, ValueError, ImportError) as error:
            raise HardwareError(
                f"cannot open the CAN interface {self._port!r} with python-can's {interface!r} "
                f"interface: {error}",
                where=self.where,
                hint=(
                    f"check that it exists and is up (`ip link show {self._port}`); "
                    f"`rlctl setup-can --interfaces={self._port}` configures it"
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
            self._exchange_refresh(
                list(self._motors), action="a state query (handshake)", rearmable=True
            )
        except HardwareError as error:
            raise HardwareError(
                error.message,
                where=error.where,
                hint=(
                    "check the 24 V supply, the CAN wiring (CANH, CANL, GND, 120 Ω at both "
                    "ends) and the motors' ids (`rlctl setup-can --mode=test` lists who "
                    "answers)"
                ),
            ) from error
        for name in self._motors:
            self._check_params(name)

    def _check_params(self, name: str) -> None:
        """Refuse a motor not in MIT mode, or whose frame scales are not its model's (it would
        read every goal at another scale). A motor that does not answer parameter reads (older
        firmware) is let through, with a warning."""
        motor = self._motors[name]
        mode = self._read_param(name, "CTRL_MODE", required=False)
        if mode is None:
            log.warning("motor answers no parameter reads; mode and scales unchecked", motor=name)
            return
        if int(mode) != dm.MIT_MODE:
            raise HardwareError(
                f"motor {name!r} ({self._ids(name)}) is in "
                f"{dm.CONTROL_MODES.get(int(mode), f'mode {mode}')} mode, not MIT",
                where=self.where,
                hint="set its control mode to MIT with Damiao's debugging tool",
            )
        for param, expected in zip(SCALE_PARAMS, dm.MODEL_LIMITS[motor.model], strict=True):
            value = self._read_param(name, param, required=False)
            if value is not None and abs(float(value) - expected) > 1e-3 * max(1.0, expected):
                raise HardwareError(
                    f"motor {name!r} ({self._ids(name)}) has {param} {value:g}, a "
                    f"{motor.model} has {expected:g}",
                    where=self.where,
                    hint="give the motor its true model in the robot's motor table, or reset "
                    "its limits with Damiao's debugging tool",
                )

    def disconnect(self, *, disable_torque: bool = True) -> None:
        if self._can is None:
            return
        try:
            if disable_torque:
                try:
                    self.disable_torque()
                except HardwareError as error:
                    # The bus must still be released; the person is told which motor kept torque.
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
        self._require_connected()
        if register in STATE_REGISTERS:
            states = self._exchange_refresh(names, action=f"read {register}")
            field = STATE_REGISTERS[register]
            return {name: float(getattr(states[name], field)) for name in names}
        if register in GAIN_REGISTERS:
            return {name: self._gains[name][register] for name in names}
        if register in dm.PARAMS:
            return {name: self._read_param(name, register, required=True) for name in names}
        raise self._unknown_register(register, readable=True)

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        names = self._names(list(values))
        if register in GAIN_REGISTERS:
            for name in names:
                self._gains[name][register] = _finite(values[name], f"{register} of {name!r}")
            return
        if register != "Goal_Position":
            raise self._unknown_register(register, readable=False)
        self._require_connected()
        frames = {}
        for name in names:
            goal = _finite(values[name], f"the goal of {name!r}")
            gains = self._gains[name]
            frames[name] = (
                self._motors[name].id,
                dm.encode_mit(self._motors[name].model, gains["Kp"], gains["Kd"], goal, 0.0, 0.0),
            )
        self._exchange(frames, action="an MIT position command")

    def enable_torque(self, motors: Iterable[str] | None = None) -> None:
        self._simple(motors, dm.CMD_ENABLE, "enable")

    def disable_torque(self, motors: Iterable[str] | None = None) -> None:
        self._simple(motors, dm.CMD_DISABLE, "disable")

    def set_zero_position(self, motors: Iterable[str] | None = None) -> None:
        """Make where each motor is now its zero (torque should be off)."""
        self._simple(motors, dm.CMD_SET_ZERO, "set zero")

    def configure_motors(self) -> None:
        """LeRobot's configuration in MIT mode: every motor enabled."""
        self.enable_torque()

    def _simple(self, motors: Iterable[str] | None, command: int, action: str) -> None:
        self._require_connected()
        names = self._names(None if motors is None else list(motors))
        frame = dm.simple_command(command)
        # Enabling is how a motor whose CAN timeout ran out is armed again.
        rearmable = command == dm.CMD_ENABLE
        frames = {n: (self._motors[n].id, frame) for n in names}
        self._exchange(frames, action=action, rearmable=rearmable)

    # Discovery: Damiao ids and bitrates are set with Damiao's tools

    def ping(self, motor_id: int) -> int | None:
        raise self._no_discovery("ping")

    def scan(self) -> dict[int, int]:
        raise self._no_discovery("scan")

    def scan_baudrates(self, baudrates: Iterable[int] | None = None) -> dict[int, dict[int, int]]:
        raise self._no_discovery("scan bitrates")

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        raise NotSupported(
            "Damiao motors get their CAN ids from Damiao's debugging tool, not from rlctl",
            where=self.where,
            hint=f"`rlctl setup-can --mode=test --interfaces={self._port}` lists the ids that "
            "answer",
        )

    def _no_discovery(self, what: str) -> NotSupported:
        return NotSupported(
            f"cannot {what} a Damiao bus: its motors report no model",
            where=self.where,
            hint=f"`rlctl setup-can --mode=test --interfaces={self._port}` lists the ids that "
            "answer",
        )

    # Calibration: the motors keep only their zero

    def read_calibration(self) -> Calibration:
        return self.calibration if self.calibration is not None else Calibration({})

    def write_calibration(self, calibration: Calibration) -> None:
        self.calibration = calibration

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        raise NotSupported(
            "Damiao motors keep no homing offsets or limits to reset",
            where=self.where,
            hint="their zero is set with set_zero_position (`rlctl calibrate` does it)",
        )

    def set_half_turn_homings(self, motors: Iterable[str] | None = None) -> dict[str, int]:
        """Damiao's equivalent: where the motors are becomes their zero (offsets are 0)."""
        names = self._names(None if motors is None else list(motors))
        self.set_zero_position(names)
        return dict.fromkeys(names, 0)

    # Exchanges

    def _exchange_refresh(
        self, names: list[str], *, action: str, rearmable: bool = False
    ) -> dict[str, dm.MotorState]:
        frames = {
            n: (dm.PARAM_ID, dm.param_request(self._motors[n].id, dm.CMD_REFRESH)) for n in names
        }
        return self._exchange(frames, action=action, rearmable=rearmable)

    def _exchange(
        self, frames: Mapping[str, tuple[int, bytes]], *, action: str, rearmable: bool = False
    ) -> dict[str, dm.MotorState]:
        """Send each motor its frame, collect its feedback; resend to the silent ones.
        `rearmable`: a motor reporting that its CAN timeout ran out (it disabled itself while
        no host spoke to it, as between two runs) is not a fault here (handshake, enable)."""
        states: dict[str, dm.MotorState] = {}
        malformed: dict[str, str] = {}
        pending = list(frames)
        for _ in range(self._retries + 1):
            self._drain()
            for name in pending:
                arbitration_id, data = frames[name]
                self._send(arbitration_id, data, name, action)
            got = self._collect(pending, malformed)
            for name, state in got.items():
                states[name] = state
                self._states[name] = state
                if rearmable and state.status == dm.STATE_TIMED_OUT:
                    log.warning("motor had disabled itself: its CAN timeout ran out", motor=name)
                elif state.fault is not None:
                    raise HardwareError(
                        f"motor {name!r} ({self._ids(name)}) reports {state.fault} "
                        f"(answering {action})",
                        where=self.where,
                        hint="disable the motor, remove the cause (load, supply, heat) and "
                        "power-cycle it; its fault stays latched until then",
                    )
            pending = [name for name in pending if name not in got]
            if not pending:
                return states
        tries = self._retries + 1
        name = pending[0]
        others = f" (nor did {', '.join(repr(n) for n in pending[1:])})" if pending[1:] else ""
        if name in malformed:
            raise HardwareError(
                f"motor {name!r} ({self._ids(name)}) answered {action} with {malformed[name]} "
                f"after {tries} {'try' if tries == 1 else 'tries'}{others}",
                where=self.where,
                hint="check the CAN wiring and termination, and that no two motors share a "
                "receive id",
            )
        raise HardwareError(
            f"motor {name!r} ({self._ids(name)}) did not answer {action} after {tries} "
            f"{'try' if tries == 1 else 'tries'}{others}",
            where=self.where,
            hint="check that the motor is powered (24 V) and cabled, and that its ids are "
            "the robot's (Damiao's debugging tool sets them)",
        )

    def _collect(self, names: list[str], malformed: dict[str, str]) -> dict[str, dm.MotorState]:
        by_recv = {self._recv[n]: n for n in names}
        got: dict[str, dm.MotorState] = {}
        deadline = time.monotonic() + self._timeout
        while len(got) < len(names):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            msg = self._can.recv(timeout=left)
            if msg is None:
                break
            name = by_recv.get(msg.arbitration_id)
            if name is None or name in got or msg.is_extended_id:
                continue
            try:
                got[name] = dm.decode_feedback(
                    self._motors[name].model, self._motors[name].id, bytes(msg.data)
                )
            except dm.MalformedFrame as error:
                malformed[name] = str(error)
        return got

    def _read_param(self, name: str, param: str, *, required: bool) -> Any:
        self._require_connected()
        rid = dm.PARAMS[param]
        motor_id = self._motors[name].id
        for _ in range(self._retries + 1):
            self._drain()
            self._send(dm.PARAM_ID, dm.param_request(motor_id, dm.CMD_READ_PARAM, rid), name, param)
            deadline = time.monotonic() + self._timeout
            while (left := deadline - time.monotonic()) > 0:
                msg = self._can.recv(timeout=left)
                if msg is None:
                    break
                data = bytes(msg.data)
                if msg.arbitration_id == self._recv[name] and dm.is_param_reply(
                    data, motor_id, rid
                ):
                    return dm.decode_param(rid, data[4:8])
        if not required:
            return None
        raise HardwareError(
            f"motor {name!r} ({self._ids(name)}) did not answer the read of {param} after "
            f"{self._retries + 1} tries",
            where=self.where,
            hint="check that the motor is powered and cabled; older firmware answers no "
            "parameter reads",
        )

    def _send(self, arbitration_id: int, data: bytes, name: str, action: str) -> None:
        msg = can.Message(
            arbitration_id=arbitration_id, data=data, is_extended_id=False, is_fd=self._fd
        )
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
        return f"CAN id 0x{self._motors[name].id:02X}, answers on 0x{self._recv[name]:02X}"

    def _unknown_register(self, register: str, *, readable: bool) -> InvalidInput:
        known = (
            [*STATE_REGISTERS, *GAIN_REGISTERS, *dm.PARAMS]
            if readable
            else ["Goal_Position", *GAIN_REGISTERS]
        )
        return InvalidInput(
            f"Damiao motors in MIT mode have no {'readable' if readable else 'writable'} "
            f"register {register!r}",
            where=self.where,
            hint=f"{'readable' if readable else 'writable'}: {', '.join(known)}",
        )

    def _check_unique_ids(self) -> None:
        seen: dict[int, str] = {}
        for name, motor in self._motors.items():
            for can_id in (motor.id, self._recv[name]):
                if can_id in seen and seen[can_id] != name:
                    raise InvalidInput(
                        f"motors {seen[can_id]!r} and {name!r} share the CAN id 0x{can_id:02X}",
                        where=self.where,
                        hint="every motor needs its own send and receive ids",
                    )
                seen[can_id] = name


def _finite(value: MotorValue, what: str) -> float:
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidInput(f"{what} is {number}, not a finite number")
    return number
