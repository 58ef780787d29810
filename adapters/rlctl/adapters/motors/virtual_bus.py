"""A virtual servo bus: a pseudo-terminal with simulated Feetech or Dynamixel motors behind it.

The host side opens `bus.port` like any serial device (pyserial, the vendors' SDKs, LeRobot) and
speaks the real wire protocol; a background thread reads the instruction packets from the pty's
master side and writes the status packets back, byte for byte what the motors would send. Only
motors set to the baud rate the host's port is configured at hear anything, so baud-rate searches
behave as on a real bus.

    with VirtualServoBus.uniform("feetech", "sts3215", ids=range(1, 7)) as bus:
        FeetechMotorBus(bus.port, motors).connect()
        bus.faults.drop_replies(motor_id=3)       # the next reply of motor 3 is lost
        bus.unplug(5)                             # motor 5 stops answering

Faults: dropped replies, corrupted checksums, added latency, absent motors, hardware error bits
(`bus.motor(2).hardware_error = ...`).
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import select
import termios
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Self

import structlog

from rlctl.adapters.motors.tables import Family, servo_model
from rlctl.adapters.motors.virtual_firmware import DynamixelFirmware, FeetechFirmware, Firmware
from rlctl.adapters.motors.virtual_motor import VirtualMotor
from rlctl.adapters.motors.virtual_pty import PtyDevice

# struct termios2 holds the exact speeds (custom rates such as 250000 included); Linux only.
_TCGETS2 = getattr(termios, "TCGETS2", 0x802C542A)
_TERMIOS2_OSPEED = 10

log = structlog.get_logger(__name__)


class FaultInjector:
    """Scripted misbehaviour, consumed reply by reply. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._drops: dict[int, int] = {}
        self._corruptions: dict[int, int] = {}
        self.latency_s = 0.0

    def drop_replies(self, motor_id: int, count: int = 1) -> None:
        """The next `count` status packets of `motor_id` are never sent."""
        with self._lock:
            self._drops[motor_id] = self._drops.get(motor_id, 0) + count

    def corrupt_replies(self, motor_id: int, count: int = 1) -> None:
        """The next `count` status packets of `motor_id` go out with a wrong checksum/CRC."""
        with self._lock:
            self._corruptions[motor_id] = self._corruptions.get(motor_id, 0) + count

    def clear(self) -> None:
        with self._lock:
            self._drops.clear()
            self._corruptions.clear()
            self.latency_s = 0.0

    def apply(self, motor_id: int, packet: bytes) -> bytes | None:
        with self._lock:
            if self._take(self._drops, motor_id):
                return None
            if self._take(self._corruptions, motor_id):
                return packet[:-1] + bytes([packet[-1] ^ 0x5A])
            return packet

    @staticmethod
    def _take(counts: dict[int, int], motor_id: int) -> bool:
        if counts.get(motor_id, 0) <= 0:
            return False
        counts[motor_id] -= 1
        return True


class VirtualServoBus(PtyDevice):
    device_name = "virtual bus"

    def __init__(
        self,
        family: Family | str,
        motors: Mapping[int, str],
        *,
        baudrate: int = 1_000_000,
        tau_s: float = 0.05,
    ) -> None:
        """`motors`: id -> model name ("sts3215", "xl430-w250", …), all of one family."""
        self.family = Family(family)
        self._motors = [
            VirtualMotor(servo_model(model, self.family), motor_id, baudrate=baudrate, tau_s=tau_s)
            for motor_id, model in motors.items()
        ]
        self._unplugged: set[int] = set()
        self._firmware: Firmware = (
            FeetechFirmware() if self.family is Family.FEETECH else DynamixelFirmware()
        )
        self.faults = FaultInjector()
        self.packets_handled = 0
        super().__init__()
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None

    @classmethod
    def uniform(
        cls, family: Family | str, model: str, ids: Iterable[int], **kwargs: float
    ) -> VirtualServoBus:
        return cls(family, dict.fromkeys(ids, model), **kwargs)  # type: ignore[arg-type]

    # Life cycle

    def start(self) -> Self:
        self._open_pty()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="virtual-servo-bus", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        os.write(self._wake_w, b"x")
        thread, self._thread = self._thread, None
        self._close_pty_after([thread], self._wake_r, self._wake_w)

    # The motors

    def motor(self, motor_id: int) -> VirtualMotor:
        for motor in self._motors:
            if motor.id == motor_id:
                return motor
        raise KeyError(f"no virtual motor with id {motor_id}")

    @property
    def motors(self) -> list[VirtualMotor]:
        return list(self._motors)

    def unplug(self, motor_id: int) -> None:
        """The motor stops hearing and answering anything (a loose cable, no power)."""
        self._unplugged.add(id(self.motor(motor_id)))

    def plug(self, motor_id: int) -> None:
        self._unplugged.discard(id(self.motor(motor_id)))

    def host_baudrate(self) -> int | None:
        """The baud rate the host configured on its end of the pty, None if unknown."""
        try:
            buf = array.array("i", [0] * 64)
            fcntl.ioctl(self._slave, _TCGETS2, buf)
            return buf[_TERMIOS2_OSPEED]
        except OSError:
            return None

    def _listening(self) -> dict[int, VirtualMotor]:
        baudrate = self.host_baudrate()
        heard = [
            m
            for m in self._motors
            if id(m) not in self._unplugged and (baudrate is None or m.baudrate == baudrate)
        ]
        return {m.id: m for m in sorted(heard, key=lambda m: m.id)}

    # The server thread

    def _serve(self) -> None:
        reader = self._firmware.new_reader()
        while True:
            ready, _, _ = select.select([self._master, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                data = os.read(self._master, 4096)
            except OSError:
                return
            for packet in reader.feed(data):
                self.packets_handled += 1
                try:
                    replies = self._firmware.answer(packet, self._listening())
                except Exception as err:
                    # A malformed instruction must not kill the bus; real firmware ignores it.
                    log.warning(
                        "virtual bus ignored an instruction", packet=repr(packet), error=repr(err)
                    )
                    continue
                self._send(replies)

    def _send(self, replies: list[tuple[int, bytes]]) -> None:
        out = bytearray()
        for motor_id, packet in replies:
            sent = self.faults.apply(motor_id, packet)
            if sent is not None:
                out += sent
        if not out:
            return
        if self.faults.latency_s > 0:
            time.sleep(self.faults.latency_s)
        os.write(self._master, bytes(out))


def main(argv: list[str] | None = None) -> None:
    """Serve a virtual bus from its own process (no GIL shared with the host) until stdin closes
    or the process is interrupted; the port's path is printed on the first line of stdout.

        python -m rlctl.adapters.motors.virtual_bus --family feetech --model sts3215 --ids 1-6
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        description=main.__doc__.splitlines()[0] if main.__doc__ else ""
    )
    parser.add_argument("--family", choices=[f.value for f in Family], default="feetech")
    parser.add_argument("--model", default="sts3215")
    parser.add_argument("--ids", default="1-6", help="ids as FIRST-LAST or a comma list")
    parser.add_argument("--baudrate", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    if "-" in args.ids:
        first, last = (int(part) for part in args.ids.split("-"))
        ids: list[int] = list(range(first, last + 1))
    else:
        ids = [int(part) for part in args.ids.split(",")]
    with VirtualServoBus.uniform(args.family, args.model, ids, baudrate=args.baudrate) as bus:
        print(bus.port, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()


if __name__ == "__main__":
    main()
