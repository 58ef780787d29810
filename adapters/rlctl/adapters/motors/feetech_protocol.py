"""Feetech SCS/STS wire format (protocol 0): framing, checksum and instruction parameters.

    FF FF | ID | LEN | INSTRUCTION or ERROR | PARAMS… | CHECKSUM

LEN counts the instruction (or error) byte, the parameters and the checksum; the checksum is the
inverted low byte of the sum of ID..last parameter. Multi-byte values are little-endian on the
STS/SMS series. Both directions share the framing: host packets carry an instruction, servo
packets ("status") carry an error byte.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator

import attrs

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 0xFC
_MAX_LENGTH = 250  # the SDK's RXPACKET_MAX_LEN


class Instruction(enum.IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83


class StatusError(enum.IntFlag):
    """Bits of a status packet's error byte."""

    VOLTAGE = 0x01
    ANGLE = 0x02
    OVERHEAT = 0x04
    OVERELE = 0x08
    OVERLOAD = 0x20


def checksum(body: bytes) -> int:
    """`body` is ID..last parameter (no header, no checksum)."""
    return ~sum(body) & 0xFF


@attrs.frozen
class Packet:
    id: int
    code: int  # the instruction (host -> servo) or the error byte (servo -> host)
    params: bytes = b""

    def encode(self) -> bytes:
        body = bytes([self.id, len(self.params) + 2, self.code]) + self.params
        return HEADER + body + bytes([checksum(body)])


def instruction(motor_id: int, op: Instruction, params: bytes = b"") -> bytes:
    return Packet(motor_id, op, params).encode()


def status(motor_id: int, error: int = 0, params: bytes = b"") -> bytes:
    return Packet(motor_id, error, params).encode()


class PacketReader:
    """Cuts a byte stream into packets, skipping noise and packets with a bad checksum.

    Feed it what the port delivered; it keeps an incomplete tail for the next feed.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.bad_checksums = 0

    def feed(self, data: bytes) -> list[Packet]:
        self._buffer += data
        return list(self._drain())

    def _drain(self) -> Iterator[Packet]:
        buf = self._buffer
        while True:
            start = buf.find(HEADER)
            if start < 0:
                # Keep a trailing 0xFF: it may be the first half of the next header.
                del buf[: max(0, len(buf) - 1)]
                return
            del buf[:start]
            if len(buf) < 4:
                return
            motor_id, length = buf[2], buf[3]
            if motor_id > BROADCAST_ID or not 2 <= length <= _MAX_LENGTH:
                del buf[:1]  # not a header after all (e.g. FF FF FF); resynchronise
                continue
            total = length + 4
            if len(buf) < total:
                return
            body, received = bytes(buf[2 : total - 1]), buf[total - 1]
            if checksum(body) != received:
                self.bad_checksums += 1
                del buf[:2]
                continue
            del buf[:total]
            yield Packet(motor_id, body[2], body[3:])


# Parameters of the instructions a servo answers, in the order the SDK writes them.


def read_params(address: int, length: int) -> bytes:
    return bytes([address, length])


def write_params(address: int, data: bytes) -> bytes:
    return bytes([address]) + data


def sync_read_params(address: int, length: int, ids: list[int]) -> bytes:
    return bytes([address, length, *ids])


def sync_write_params(address: int, length: int, data_by_id: dict[int, bytes]) -> bytes:
    out = bytearray([address, length])
    for motor_id, data in data_by_id.items():
        out += bytes([motor_id]) + data
    return bytes(out)


def parse_sync_write(params: bytes) -> tuple[int, int, dict[int, bytes]]:
    address, length = params[0], params[1]
    entries = params[2:]
    step = length + 1
    data = {entries[i]: bytes(entries[i + 1 : i + step]) for i in range(0, len(entries), step)}
    return address, length, data
