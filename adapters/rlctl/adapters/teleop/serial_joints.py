"""Joints streamed as text lines over a USB serial port (the Homunculus boards: an ESP32 prints
one line of space-separated integers per reading), served as a read-only `MotorBus`.

A background thread reads the lines; each read waits for a line newer than the last one read,
as LeRobot's `_read` does, so a board that stops sending is noticed within `timeout_s`. A line
that does not parse (garbled, cut, wrong count) is skipped; when nothing but such lines came
for `timeout_s`, the error quotes one. The joints are raw readings (0..4095 on the ESP32's
12-bit ADC); the calibration, kept in LeRobot's file only, maps them to user units as LeRobot's
`_normalize` does (clamped to the recorded range, mirrored with drive mode 1).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog

from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.errors import CalibrationError, HardwareError, InvalidInput, NotSupported
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

Parse = Callable[[list[str]], dict[str, int] | None]
MotorValue = int | float
ADC_MAX = 4095  # the ESP32's ADC: 12 bits
_LINE_POLL_S = 0.05
_POSITION = "Present_Position"


class SerialJointBus:
    """`parse(tokens)` turns one line's tokens into raw joint readings, or None when the line
    is not a reading. `smoothing` > 1 applies LeRobot's exponential moving average (alpha
    2/(n+1)) to the raw readings, rounded, once per read (the glove's)."""

    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        parse: Parse,
        *,
        device: str,
        baudrate: int = 115_200,
        timeout_s: float = 1.0,
        first_line_timeout_s: float = 2.0,
        smoothing: int = 0,
        expected: str = "",
        firmware: str = "Homunculus",
        baud_setting: str = "--teleop.baud_rate",
    ) -> None:
        if timeout_s <= 0 or first_line_timeout_s <= 0:
            raise InvalidInput(
                f"the serial timeouts must be above 0 s, got {timeout_s} and "
                f"{first_line_timeout_s}",
                where=device,
            )
        self._port = port
        self._motors = dict(motors)
        self._parse = parse
        self._device = device
        self._baudrate = baudrate
        self._timeout_s = timeout_s
        self._first_timeout_s = first_line_timeout_s
        self._alpha = 2 / (smoothing + 1) if smoothing > 1 else None
        self._ema: dict[str, float] = {}
        self._expected = expected
        self._firmware = firmware
        self._baud_setting = baud_setting
        self.calibration: Calibration | None = None
        self._serial: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._state: dict[str, int] | None = None
        self._count = 0  # readings parsed so far
        self._consumed = 0  # the reading count last returned
        self._garbled = 0
        self._last_garbled: str | None = None
        self._failure: BaseException | None = None

    # MotorBus: what applies to a board that only reports

    @property
    def port(self) -> str:
        return self._port

    @property
    def motors(self) -> Mapping[str, Motor]:
        return self._motors

    @property
    def is_connected(self) -> bool:
        return self._serial is not None and self._thread is not None and self._thread.is_alive()

    @property
    def baudrate(self) -> int:
        return self._baudrate

    def __repr__(self) -> str:
        return f"SerialJointBus({self._port!r}, {self._device})"

    def connect(self, *, handshake: bool = True) -> None:
        """Open the port and wait for the first reading (LeRobot waits 2 s)."""
        if self.is_connected:
            return
        try:
            import serial
        except ImportError as err:
            raise NotSupported(
                "pyserial is missing", where=self._device, hint="pip install 'rlctl[feetech]'"
            ) from err
        try:
            self._serial = serial.serial_for_url(
                self._port, self._baudrate, timeout=_LINE_POLL_S, exclusive=None
            )
        except (serial.SerialException, OSError, ValueError) as err:
            raise HardwareError(
                f"cannot open the {self._device}'s port: {err}",
                where=self._port,
                hint="plug the board in and check the port with `rlctl find-port`",
            ) from err
        self._serial.reset_input_buffer()  # readings from before we looked are stale
        self._stop.clear()
        self._failure = None
        self._state, self._count, self._consumed, self._garbled = None, 0, 0, 0
        self._ema = {}
        self._thread = threading.Thread(
            target=self._read_lines, name=f"{self._device} lines", daemon=True
        )
        self._thread.start()
        try:
            self._wait_for_reading(self._first_timeout_s)
        except BaseException:
            self.disconnect()
            raise

    def disconnect(self, *, disable_torque: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._serial is not None:
            try:
                self._serial.close()
            finally:
                self._serial = None

    def read(self, register: str, motor: str, *, normalize: bool = True) -> MotorValue:
        return self.sync_read(register, [motor], normalize=normalize)[motor]

    def sync_read(
        self, register: str, motors: Sequence[str] | None = None, *, normalize: bool = True
    ) -> dict[str, MotorValue]:
        """The newest reading of `motors` (waiting for one newer than the last read)."""
        if register != _POSITION:
            raise NotSupported(
                f"the {self._device} reports joint positions only, not {register}",
                where=self._port,
            )
        names = list(self._motors) if motors is None else list(motors)
        unknown = [name for name in names if name not in self._motors]
        if unknown:
            raise InvalidInput(
                f"the {self._device} has no joint {', '.join(unknown)}",
                where=self._port,
                hint=f"its joints: {', '.join(self._motors)}",
            )
        raw = self._smoothed(self._wait_for_reading(self._timeout_s))
        values = {name: raw[name] for name in names}
        if not normalize:
            return dict(values)
        calibration = self._calibration()
        return {
            name: calibration.normalize(name, value, self._motors[name].norm_mode, ADC_MAX + 1)
            for name, value in values.items()
        }

    def read_calibration(self) -> Calibration:
        """The board keeps none: the loaded one, else no offset and the whole ADC range."""
        if self.calibration is not None:
            return self.calibration
        return Calibration(
            {
                name: MotorCalibration(
                    id=motor.id, drive_mode=0, homing_offset=0, range_min=0, range_max=ADC_MAX
                )
                for name, motor in self._motors.items()
            }
        )

    def write_calibration(self, calibration: Calibration) -> None:
        calibration.require(self._motors)
        self.calibration = calibration

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        self.calibration = None

    def disable_torque(self, motors: Iterable[str] | None = None) -> None:
        """Nothing to let go of: the joints are sensors and always move freely."""

    def configure_motors(self) -> None:
        """Nothing to configure (LeRobot's `configure` does nothing either)."""

    # MotorBus: what a board with no motors cannot do

    def set_baudrate(self, baudrate: int) -> None:
        raise self._no_motors("change its baud rate")

    def write(
        self, register: str, motor: str, value: MotorValue, *, normalize: bool = True
    ) -> None:
        raise self._no_motors(f"write {register}")

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        raise self._no_motors(f"write {register}")

    def enable_torque(self, motors: Iterable[str] | None = None) -> None:
        raise self._no_motors("hold its joints")

    def ping(self, motor_id: int) -> int | None:
        raise self._no_motors("be pinged")

    def scan(self) -> dict[int, int]:
        raise self._no_motors("be scanned for motors")

    def scan_baudrates(self, baudrates: Iterable[int] | None = None) -> dict[int, dict[int, int]]:
        raise self._no_motors("be scanned for motors")

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        raise self._no_motors("have motor ids set")

    def set_half_turn_homings(self, motors: Iterable[str] | None = None) -> dict[str, int]:
        raise self._no_motors("be homed")

    def _no_motors(self, what: str) -> NotSupported:
        return NotSupported(
            f"the {self._device} has sensors, not motors: it cannot {what}",
            where=self._port,
            hint="it streams its joints over USB; calibrate it with `rlctl calibrate`",
        )

    # The reading thread

    def _read_lines(self) -> None:
        port = self._serial
        try:
            while not self._stop.is_set():
                line = port.readline()
                if not line:
                    continue
                text = line.decode("utf-8", errors="replace").strip()
                if not text:
                    continue
                try:
                    reading = self._parse(text.split())
                except ValueError:
                    reading = None
                if reading is not None and not _adc_readings(reading.values()):
                    reading = None  # a number no 12-bit ADC gives: a garbled line
                with self._changed:
                    if reading is None:
                        self._garbled += 1
                        self._last_garbled = text[:80]
                    else:
                        self._state = reading
                        self._count += 1
                    self._changed.notify_all()
        except Exception as error:  # the port went away (unplugged, closed under us)
            if not self._stop.is_set():
                with self._changed:
                    self._failure = error
                    self._changed.notify_all()

    def _wait_for_reading(self, timeout_s: float) -> dict[str, int]:
        with self._changed:
            garbled_before = self._garbled
            fresh = self._changed.wait_for(
                lambda: self._count > self._consumed or self._failure is not None, timeout_s
            )
            if self._failure is not None:
                raise HardwareError(
                    f"the {self._device}'s port failed: {self._failure}",
                    where=self._port,
                    hint="check its USB cable; the board may have been unplugged",
                )
            if not fresh or self._state is None:
                raise self._silence(timeout_s, garbled=self._garbled - garbled_before)
            self._consumed = self._count
            return dict(self._state)

    def _silence(self, timeout_s: float, *, garbled: int) -> HardwareError:
        if garbled:
            return HardwareError(
                f"the {self._device} sent {garbled} unreadable line(s) and no reading for "
                f"{timeout_s:g} s (last: {self._last_garbled!r}; expected {self._expected})",
                where=self._port,
                hint=f"check the baud rate ({self._baud_setting}, 115200 by default) and that "
                f"the board runs the {self._firmware} firmware",
            )
        return HardwareError(
            f"the {self._device} sent nothing for {timeout_s:g} s",
            where=self._port,
            hint="check that the board is plugged in and powered, and that it runs the "
            f"{self._firmware} firmware (its serial monitor shows lines of numbers)",
        )

    def _smoothed(self, raw: dict[str, int]) -> dict[str, int]:
        if self._alpha is None:
            return raw
        out = {}
        for name, value in raw.items():
            previous = self._ema.get(name)
            ema = (
                float(value)
                if previous is None
                else self._alpha * value + (1 - self._alpha) * previous
            )
            self._ema[name] = ema
            out[name] = round(ema)
        return out

    def _calibration(self) -> Calibration:
        if self.calibration is None:
            raise CalibrationError(
                f"the {self._device} has no calibration, so its joints cannot be read",
                where=self._port,
                hint=f"run `rlctl calibrate --teleop.type={self._device} "
                f"--teleop.port={self._port}`",
            )
        return self.calibration


def _adc_readings(values: Iterable[int]) -> bool:
    return all(0 <= value <= ADC_MAX for value in values)
