"""What the CAN motor buses (`DamiaoMotorBus`, `RobstrideMotorBus`) share: opening python-can's
bus and naming its errors, the send/receive exchange with retries, the handshake, closing, and
the `MotorBus` port's parts that do not depend on the brand (names, calibration kept in memory,
no discovery). Each bus adds its own frames: how an answer names its motor and is decoded, what
a state query is, and what its errors advise.

A motor that does not answer is never papered over with its last known state: each exchange is
retried (`retries`), then fails with a `HardwareError` naming the motor, its CAN ids and the bus.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import can
import structlog

from rlctl.adapters.motors.mit_protocol import (
    CMD_DISABLE,
    CMD_ENABLE,
    CMD_SET_ZERO,
    MalformedFrame,
)
from rlctl.domain.calibration import Calibration
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported
from rlctl.domain.motors import Motor

MotorValue = int | float

GAIN_REGISTERS = ("Kp", "Kd")
DEFAULT_GAINS = {"Kp": 10.0, "Kd": 0.5}  # LeRobot's defaults until a robot sets its own


class CanMotorBus[StateT]:
    """The base of a CAN motor bus; `StateT` is the brand's decoded feedback."""

    brand: ClassVar[str]  # "Damiao", in messages
    # The brand's module logger, so that records keep their origin.
    _log: ClassVar[Any] = structlog.get_logger(__name__)
    # What to check when a motor's answers stay malformed, or it stays silent, through every try.
    malformed_hint: ClassVar[str]
    silent_hint: ClassVar[str]

    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None,
        recv_ids: Mapping[str, int] | None,
        timeout_s: float,
        retries: int,
        interface: str,
        bitrate: int,
        use_can_fd: bool = False,
        data_bitrate: int | None = None,
    ) -> None:
        """The subclass's arguments, in its order; `use_can_fd` and `data_bitrate` apply to
        socketcan interfaces only."""
        where = f"CAN bus {port}"
        if retries < 0:
            raise InvalidInput(f"retries must be >= 0, got {retries}", where=where)
        if timeout_s <= 0:
            raise InvalidInput(f"timeout_s must be > 0, got {timeout_s}", where=where)
        self._port = port
        self._motors = dict(motors)
        self._check_models()
        extra = set(recv_ids or {}) - set(self._motors)
        if extra:
            raise InvalidInput(
                f"recv_ids names motors the bus does not have: {', '.join(sorted(extra))}",
                where=where,
            )
        self._recv = {
            name: (recv_ids or {}).get(name, self._default_recv_id(motor))
            for name, motor in self._motors.items()
        }
        self._check_ids()
        self.calibration = calibration
        self._interface = interface
        self._fd = use_can_fd
        self._bitrate = bitrate
        self._data_bitrate = data_bitrate
        self._timeout = timeout_s
        self._retries = retries
        self._can: Any = None
        self._gains = {name: dict(DEFAULT_GAINS) for name in self._motors}
        self._states: dict[str, StateT] = {}

    # What each brand says

    def _check_models(self) -> None:
        raise NotImplementedError

    def _default_recv_id(self, motor: Motor) -> int:
        raise NotImplementedError

    def _check_ids(self) -> None:
        """Refuse receive ids out of range and motors sharing an id."""
        raise NotImplementedError

    def _ids(self, name: str) -> str:
        """The motor's CAN ids, as messages name them."""
        raise NotImplementedError

    def _setup_command(self) -> str:
        """The `rlctl setup-can` command that brings this bus's socketcan interface up."""
        raise NotImplementedError

    def _query(self, names: list[str], *, action: str) -> dict[str, StateT]:
        """The handshake's state query (it moves nothing), answered by every motor in `names`."""
        raise NotImplementedError

    def _handshake_hint(self, error: HardwareError) -> str:
        raise NotImplementedError

    def _discovery_hint(self) -> str:
        raise NotImplementedError

    def _simple(self, motors: Iterable[str] | None, command: int, action: str) -> None:
        """Send each motor one of the simple commands (enable, disable, set zero)."""
        raise NotImplementedError

    def _answer_id(self, arbitration_id: int, data: bytes) -> int | None:
        """The receive id an answer names (its arbitration id, or a byte of it)."""
        raise NotImplementedError

    def _decode(self, name: str, data: bytes, action: str) -> StateT:
        """The motor's answer, decoded; `MalformedFrame` when it is not a feedback frame, a
        `HardwareError` when it reports a fault."""
        raise NotImplementedError

    def _check_state(self, name: str, state: StateT, action: str, *, rearmable: bool) -> None:
        """Refuse a state that reports a fault (a brand whose states tell faults)."""

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

    def last_state(self, motor: str) -> StateT | None:
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
            self._can = self._open_can(kwargs)
        except (can.CanError, OSError, ValueError, ImportError) as error:
            raise HardwareError(
                f"cannot open the CAN interface {self._port!r} with python-can's {interface!r} "
                f"interface: {error}",
                where=self.where,
                hint=(
                    f"check that it exists and is up (`ip link show {self._port}`); "
                    f"`{self._setup_command()}` configures it"
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
        self._log.debug("CAN bus connected", port=self._port, interface=interface)

    def _open_can(self, kwargs: dict[str, Any]) -> Any:
        """python-can's bus (a brand's bus may open another for its own interfaces)."""
        return can.Bus(**kwargs)

    def _handshake(self) -> None:
        self._drain()
        try:
            self._query(list(self._motors), action="a state query (handshake)")
        except HardwareError as error:
            raise HardwareError(
                error.message, where=error.where, hint=self._handshake_hint(error)
            ) from error

    def disconnect(self, *, disable_torque: bool = True) -> None:
        if self._can is None:
            return
        try:
            if disable_torque:
                try:
                    self.disable_torque()
                except HardwareError as error:
                    # The bus must still be released; the person is told which motor kept torque.
                    self._log.warning("torque not disabled on disconnect", error=error.message)
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
        raise NotImplementedError

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        raise NotImplementedError

    def enable_torque(self, motors: Iterable[str] | None = None) -> None:
        self._simple(motors, CMD_ENABLE, "enable")

    def disable_torque(self, motors: Iterable[str] | None = None) -> None:
        self._simple(motors, CMD_DISABLE, "disable")

    def set_zero_position(self, motors: Iterable[str] | None = None) -> None:
        """Make where each motor is now its zero (torque should be off)."""
        self._simple(motors, CMD_SET_ZERO, "set zero")

    # Discovery: ids and bitrates are set with the brand's own tools

    def ping(self, motor_id: int) -> int | None:
        raise self._no_discovery("ping")

    def scan(self) -> dict[int, int]:
        raise self._no_discovery("scan")

    def scan_baudrates(self, baudrates: Iterable[int] | None = None) -> dict[int, dict[int, int]]:
        raise self._no_discovery("scan bitrates")

    def _no_discovery(self, what: str) -> NotSupported:
        return NotSupported(
            f"cannot {what} a {self.brand} bus: its motors report no model",
            where=self.where,
            hint=self._discovery_hint(),
        )

    # Calibration: the motors keep only their zero

    def read_calibration(self) -> Calibration:
        return self.calibration if self.calibration is not None else Calibration({})

    def write_calibration(self, calibration: Calibration) -> None:
        self.calibration = calibration

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        raise NotSupported(
            f"{self.brand} motors keep no homing offsets or limits to reset",
            where=self.where,
            hint="their zero is set with set_zero_position (`rlctl calibrate` does it)",
        )

    def set_half_turn_homings(self, motors: Iterable[str] | None = None) -> dict[str, int]:
        """The equivalent on these motors: where they are becomes their zero (offsets are 0)."""
        names = self._names(None if motors is None else list(motors))
        self.set_zero_position(names)
        return dict.fromkeys(names, 0)

    # Exchanges

    def _to_motors(self, frames: Mapping[str, bytes]) -> dict[str, tuple[int, bytes]]:
        """Each frame addressed to its motor's (send) id."""
        return {name: (self._motors[name].id, data) for name, data in frames.items()}

    def _exchange(
        self, frames: Mapping[str, tuple[int, bytes]], *, action: str, rearmable: bool = False
    ) -> dict[str, StateT]:
        """Send each motor its frame (arbitration id, data), collect its feedback; resend to the
        silent ones. `rearmable` is passed to `_check_state`."""
        states: dict[str, StateT] = {}
        malformed: dict[str, str] = {}
        pending = list(frames)
        for _ in range(self._retries + 1):
            self._drain()
            for name in pending:
                arbitration_id, data = frames[name]
                self._send(arbitration_id, data, name, action)
            got = self._collect(pending, malformed, action)
            for name, state in got.items():
                states[name] = state
                self._states[name] = state
                self._check_state(name, state, action, rearmable=rearmable)
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
                hint=self.malformed_hint,
            )
        raise HardwareError(
            f"motor {name!r} ({self._ids(name)}) did not answer {action} {after}",
            where=self.where,
            hint=self.silent_hint,
        )

    def _collect(
        self, names: list[str], malformed: dict[str, str], action: str
    ) -> dict[str, StateT]:
        """The answers of `names` within the timeout, by the receive id each names."""
        by_recv = {self._recv[n]: n for n in names}
        got: dict[str, StateT] = {}
        answers = self._answers()
        while len(got) < len(names) and (msg := next(answers, None)) is not None:
            if msg.is_extended_id:
                continue
            data = bytes(msg.data)
            recv = self._answer_id(msg.arbitration_id, data)
            name = None if recv is None else by_recv.get(recv)
            if name is None or name in got:
                continue
            try:
                got[name] = self._decode(name, data, action)
            except MalformedFrame as error:
                malformed[name] = str(error)
        return got

    def _answers(self) -> Iterator[Any]:
        """The frames that arrive within the timeout of one exchange."""
        deadline = time.monotonic() + self._timeout
        while (left := deadline - time.monotonic()) > 0:
            msg = self._can.recv(timeout=left)
            if msg is None:
                return
            yield msg

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


def finite(value: MotorValue, what: str) -> float:
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidInput(f"{what} is {number}, not a finite number")
    return number


def within(number: float, limit: float, what: str) -> float:
    """`number` if its magnitude is at most `limit`; else InvalidInput. An MIT frame saturates a
    value beyond its scale to the scale's end: a goal of 1e6° would drive the motor to its
    end stop instead of being refused."""
    if abs(number) > limit:
        raise InvalidInput(
            f"{what} is {number:g}, beyond the ±{limit:g} the motor's frames carry",
            hint="send a goal within the joint's range (the robot's guard limits them)",
        )
    return number
