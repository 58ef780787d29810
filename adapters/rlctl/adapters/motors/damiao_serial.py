"""Damiao's USB-CAN serial bridge as a python-can bus, so the Damiao buses run over it as over
socketcan (LeRobot's `can_adapter="damiao"`, which `motorbridge` opens with `from_dm_serial`).

The bridge is a USB serial device (`/dev/ttyACM0`, 921600 baud). Each CAN frame to send is
wrapped in 30 bytes: `55 AA 1E 03`, send count (u32, 1), interval (u32, 10), id type (0 =
standard), the arbitration id (u32), frame type (0 = data), DLC, two zero bytes, the 8 data
bytes, and a trailing byte the bridge ignores. Each frame received comes as 16 bytes: `AA 11`,
flags (DLC in the low 6 bits, 0x40 extended, 0x80 remote), the arbitration id (u32), the 8 data
bytes, `55`. The CAN bitrate is the bridge's own (set with Damiao's tool), not the host's.
"""

from __future__ import annotations

import select
import struct
import time
from typing import Any

import can

TX_HEAD = b"\x55\xaa\x1e\x03"
RX_LEN = 16
RX_START, RX_KIND, RX_END = 0xAA, 0x11, 0x55


def encode_frame(arbitration_id: int, data: bytes, *, extended: bool = False) -> bytes:
    if len(data) > 8:
        raise ValueError(f"a classic CAN frame holds 8 bytes, not {len(data)}")
    return (
        TX_HEAD
        + struct.pack("<IIBIBBBB", 1, 10, int(extended), arbitration_id, 0, len(data), 0, 0)
        + bytes(data).ljust(8, b"\x00")
        + b"\x00"
    )


def decode_tx(raw: bytes) -> tuple[int, bytes, bool] | None:
    """A 30-byte frame the host sent: (arbitration id, data, extended); the emulator's side."""
    if len(raw) != 30 or raw[:4] != TX_HEAD:
        return None
    _count, _interval, extended, arbitration_id, _kind, dlc, _a, _b = struct.unpack(
        "<IIBIBBBB", raw[4:21]
    )
    return arbitration_id, raw[21 : 21 + min(dlc, 8)], bool(extended)


def encode_rx(arbitration_id: int, data: bytes, *, extended: bool = False) -> bytes:
    """A 16-byte frame as the bridge hands a received one over (the emulator's side)."""
    flags = (len(data) & 0x3F) | (0x40 if extended else 0)
    return (
        bytes([RX_START, RX_KIND, flags])
        + struct.pack("<I", arbitration_id)
        + bytes(data).ljust(8, b"\x00")
        + bytes([RX_END])
    )


class DamiaoSerialBus(can.BusABC):
    """`can.Bus`-like: `send`, `recv`, `shutdown` over the bridge's serial port."""

    def __init__(self, channel: str, baudrate: int = 921600, **kwargs: Any) -> None:
        import serial

        self.channel_info = f"Damiao USB-CAN bridge on {channel}"
        self._serial = serial.Serial(channel, baudrate, timeout=0)
        self._buffer = bytearray()
        super().__init__(channel=channel, **kwargs)

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        self._serial.write(
            encode_frame(msg.arbitration_id, bytes(msg.data), extended=msg.is_extended_id)
        )

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            message = self._parse()
            if message is not None:
                return message, False
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None, False
            select.select([self._serial.fileno()], [], [], left)
            self._buffer += self._serial.read(4096)

    def _parse(self) -> can.Message | None:
        while len(self._buffer) >= RX_LEN:
            start = self._buffer.find(bytes([RX_START]))
            if start < 0:
                self._buffer.clear()
                return None
            del self._buffer[:start]
            if len(self._buffer) < RX_LEN:
                return None
            raw = bytes(self._buffer[:RX_LEN])
            if raw[1] != RX_KIND or raw[15] != RX_END:
                del self._buffer[:1]
                continue
            del self._buffer[:RX_LEN]
            flags = raw[2]
            if flags & 0x80:
                continue  # a remote frame: nothing the motors send
            (arbitration_id,) = struct.unpack("<I", raw[3:7])
            return can.Message(
                arbitration_id=arbitration_id,
                data=raw[7 : 7 + min(flags & 0x3F, 8)],
                is_extended_id=bool(flags & 0x40),
                is_rx=True,
            )
        return None

    def shutdown(self) -> None:
        super().shutdown()
        self._serial.close()
