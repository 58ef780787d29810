"""FashionStar UART smart servos (the reBot Arm 102 leader's) as a `MotorBus`, over pyserial.

LeRobot 0.6.1 reads them through `motorbridge-smart-servo`, a compiled extension; this bus speaks
the same protocol itself (`fashionstar_protocol`): servos are pinged at connect, unlocked (torque
off) and their turn counts cleared when configured, zeroed with `set origin point`, and read all
at once with one sync-monitor command. Positions are the servos' multi-turn angles in degrees.

Unlike motorbridge's, a servo that does not answer is never papered over with its last reading:
the sync read is sent again to the silent ones (`retries`), then fails with a `HardwareError`
naming the servo, its id and the port. The leader's servos are only read: goals and torque are
refused.
"""

from __future__ import annotations

import select
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog

from rlctl.adapters.motors import fashionstar_protocol as fs
from rlctl.domain.calibration import Calibration
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

MotorValue = int | float
SETTLE_S = 0.01  # LeRobot waits this long after each unlock


class FashionStarMotorBus:
    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        *,
        baudrate: int = 1_000_000,
        timeout_s: float = 0.05,
        retries: int = 2,
    ) -> None:
        if timeout_s <= 0 or retries < 0:
            raise InvalidInput(
                f"timeout_s must be > 0 and retries >= 0, got {timeout_s} and {retries}",
                where=port,
            )
        self._port = port
        self._motors = dict(motors)
        ids: dict[int, str] = {}
        for name, motor in self._motors.items():
            if not 0 <= motor.id <= fs.MAX_ID:
                raise InvalidInput(
                    f"servo {name!r} has the id {motor.id}; FashionStar ids are 0..{fs.MAX_ID}",
                    where=port,
                )
            if motor.id in ids:
                raise InvalidInput(
                    f"servos {ids[motor.id]!r} and {name!r} share the id {motor.id}",
                    where=port,
                    hint="every servo needs its own id",
                )
            ids[motor.id] = name
        self.calibration = calibration
        self._baudrate = baudrate
        self._timeout = timeout_s
        self._retries = retries
        self._serial: Any = None
        self._reader = fs.PacketReader(fs.ANSWER_HEADER)

    # Description

    @property
    def port(self) -> str:
        return self._port

    @property
    def motors(self) -> Mapping[str, Motor]:
        return dict(self._motors)

    @property
    def is_connected(self) -> bool:
        return self._serial is not None

    @property
    def baudrate(self) -> int:
        return self._baudrate

    # Life cycle

    def connect(self, *, handshake: bool = True) -> None:
        if self._serial is not None:
            raise HardwareError("the servo bus is already connected", where=self._port)
        try:
            import serial
        except ImportError as error:
            raise HardwareError(
                "pyserial is not installed",
                where=self._port,
                hint="`pip install pyserial` (rlctl's `feetech` extra has it)",
            ) from error
        try:
            self._serial = serial.Serial(self._port, self._baudrate, timeout=0)
        except (OSError, ValueError, serial.SerialException) as error:
            raise HardwareError(
                f"cannot open the serial port: {error}",
                where=self._port,
                hint="check the port name (`rlctl find-port`), that the leader's USB cable is "
                "in, and that you may use it (on Linux: be in the dialout group)",
            ) from error
        try:
            if handshake:
                self._handshake()
        except BaseException:
            self._close()
            raise

    def _handshake(self) -> None:
        silent = [name for name, motor in self._motors.items() if not self._ping(motor.id)]
        if not silent:
            return
        if len(silent) == len(self._motors):
            raise HardwareError(
                f"no FashionStar servo answered on {self._port} (expected ids "
                f"{', '.join(str(m.id) for m in self._motors.values())})",
                where=self._port,
                hint="check that this is the leader's port (`rlctl find-port`), that the arm is "
                f"powered, and the baud rate ({self._baudrate})",
            )
        name = silent[0]
        others = f" (nor did {', '.join(repr(n) for n in silent[1:])})" if silent[1:] else ""
        raise HardwareError(
            f"servo {name!r} (id {self._motors[name].id}) did not answer a ping{others}",
            where=self._port,
            hint="check the servo's cable and its id (FashionStar's debugging tool sets it)",
        )

    def disconnect(self, *, disable_torque: bool = True) -> None:
        if self._serial is None:
            return
        try:
            if disable_torque:
                try:
                    self.disable_torque()
                except HardwareError as error:
                    log.warning("servos not unlocked on disconnect", error=error.message)
        finally:
            self._close()

    def _close(self) -> None:
        if self._serial is not None:
            try:
                self._serial.close()
            finally:
                self._serial = None

    def set_baudrate(self, baudrate: int) -> None:
        raise NotSupported(
            "the leader's baud rate is set in its config (`baudrate`)",
            where=self._port,
            hint=f"--teleop.baudrate={baudrate}",
        )

    # Registers: only positions are read; nothing is written

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
        if register != "Present_Position":
            raise InvalidInput(
                f"FashionStar servos have no readable register {register!r} here",
                where=self._port,
                hint="readable: Present_Position",
            )
        self._require_connected()
        monitors = self.sync_monitor(names)
        return {name: monitors[name].angle_deg for name in names}

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        raise NotSupported(
            f"the leader's FashionStar servos are only read (cannot write {register})",
            where=self._port,
        )

    def enable_torque(self, motors: Iterable[str] | None = None) -> None:
        raise NotSupported(
            "the leader's FashionStar servos stay free to be moved by hand", where=self._port
        )

    def disable_torque(self, motors: Iterable[str] | None = None) -> None:
        """Unlock each servo (stop mode 0x10, no holding power)."""
        self._require_connected()
        for name in self._names(None if motors is None else list(motors)):
            self._write(fs.unlock(self._motors[name].id))
            time.sleep(SETTLE_S)

    def configure_motors(self) -> None:
        """LeRobot's: every servo unlocked, then its multi-turn count cleared."""
        self.disable_torque()
        for motor in self._motors.values():
            self._write(fs.reset_multi_turn(motor.id))

    def set_zero_position(self, motors: Iterable[str] | None = None) -> None:
        """Make where each servo is now its 0° (`set origin point`)."""
        self._require_connected()
        for name in self._names(None if motors is None else list(motors)):
            self._write(fs.set_origin(self._motors[name].id))

    # Discovery: ids are set with FashionStar's tool

    def ping(self, motor_id: int) -> int | None:
        self._require_connected()
        return 0 if self._ping(motor_id) else None

    def scan(self) -> dict[int, int]:
        self._require_connected()
        return {i: 0 for i in range(fs.MAX_ID + 1) if self._ping(i, tries=1)}

    def scan_baudrates(self, baudrates: Iterable[int] | None = None) -> dict[int, dict[int, int]]:
        raise NotSupported(
            "the leader's servos are not searched across baud rates", where=self._port
        )

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        raise NotSupported(
            "FashionStar servos get their ids from FashionStar's debugging tool, not from rlctl",
            where=self._port,
        )

    # Calibration: the servos keep only their origin

    def read_calibration(self) -> Calibration:
        return self.calibration if self.calibration is not None else Calibration({})

    def write_calibration(self, calibration: Calibration) -> None:
        self.calibration = calibration

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        raise NotSupported(
            "FashionStar servos keep no homing offsets or limits to reset",
            where=self._port,
            hint="their zero is set by `rlctl calibrate`",
        )

    def set_half_turn_homings(self, motors: Iterable[str] | None = None) -> dict[str, int]:
        """The equivalent here: each servo is unlocked and where it is becomes its 0°."""
        names = self._names(None if motors is None else list(motors))
        self.disable_torque(names)
        self.set_zero_position(names)
        return dict.fromkeys(names, 0)

    # Exchanges

    def sync_monitor(self, names: list[str]) -> dict[str, fs.Monitor]:
        """Every named servo's monitor packet; the silent ones are asked again, then named."""
        got: dict[str, fs.Monitor] = {}
        pending = list(names)
        for _ in range(self._retries + 1):
            by_id = {self._motors[n].id: n for n in pending}
            self._write(fs.sync_monitor(list(by_id)), clear=True)
            for packet in self._packets(len(by_id)):
                monitor = fs.decode_monitor(packet)
                name = None if monitor is None else by_id.get(monitor.id)
                if name is not None and monitor is not None:
                    got[name] = monitor
            pending = [n for n in pending if n not in got]
            if not pending:
                return got
        tries = self._retries + 1
        others = f" (nor did {', '.join(repr(n) for n in pending[1:])})" if pending[1:] else ""
        raise HardwareError(
            f"servo {pending[0]!r} (id {self._motors[pending[0]].id}) did not answer a position "
            f"read after {tries} {'try' if tries == 1 else 'tries'}{others}",
            where=self._port,
            hint="check the leader's power and the servo's cable; stop and hold the follower "
            "before plugging anything",
        )

    def _ping(self, motor_id: int, tries: int | None = None) -> bool:
        for _ in range(self._retries + 1 if tries is None else tries):
            self._write(fs.ping(motor_id), clear=True)
            for packet in self._packets(1):
                if packet.code == fs.PING and packet.params[:1] == bytes([motor_id]):
                    return True
        return False

    def _packets(self, expected: int) -> list[fs.Packet]:
        """The answers that arrive within the timeout, up to `expected` of them."""
        packets: list[fs.Packet] = []
        deadline = time.monotonic() + self._timeout
        while len(packets) < expected and (left := deadline - time.monotonic()) > 0:
            select.select([self._serial.fileno()], [], [], left)
            data = self._read_available()
            if data:
                packets += self._reader.feed(data)
        return packets

    def _read_available(self) -> bytes:
        import serial

        try:
            return bytes(self._serial.read(4096))
        except (OSError, serial.SerialException) as error:
            raise self._io_error(error) from error

    def _write(self, packet: bytes, *, clear: bool = False) -> None:
        import serial

        self._require_connected()
        try:
            if clear:
                self._serial.reset_input_buffer()
                self._reader = fs.PacketReader(fs.ANSWER_HEADER)
            self._serial.write(packet)
        except (OSError, serial.SerialException) as error:
            raise self._io_error(error) from error

    def _io_error(self, error: Exception) -> HardwareError:
        return HardwareError(
            f"the serial port failed: {error}",
            where=self._port,
            hint="check the leader's USB cable (unplugged?); stop and hold the follower first",
        )

    # Names

    def _require_connected(self) -> None:
        if self._serial is None:
            raise HardwareError(
                "the servo bus is not connected", where=self._port, hint="connect the leader first"
            )

    def _name(self, motor: str) -> str:
        if motor not in self._motors:
            raise InvalidInput(
                f"no servo {motor!r} on this bus (servos: {', '.join(self._motors)})",
                where=self._port,
            )
        return motor

    def _names(self, motors: Sequence[str] | None) -> list[str]:
        return list(self._motors) if motors is None else [self._name(m) for m in motors]
