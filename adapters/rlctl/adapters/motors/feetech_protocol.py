"""Feetech SCS/STS wire format (protocol 0): framing, checksum and instruction parameters.

    FF FF | ID | LEN | INSTRUCTION or ERROR | PARAMS… | CHECKSUM

LEN counts the instruction (or error) byte, the parameters and the checksum; the checksum is the
inverted low byte of the sum of ID..last parameter. Multi-byte values are little-endian on the
STS/SMS series. Both directions share the framing: host packets carry an instruction, servo
packets ("status") carry an error byte.
"""

from __future__ import annotations

import enum

import attrs

from rlctl.adapters.motors.packet_framing import (
    BROADCAST_ID,
    FrameReader,
    pack_entries,
    split_entries,
)
from rlctl.adapters.motors.packet_framing import MAX_ID as MAX_ID

HEADER = b"\xff\xff"
_MAX_LENGTH = 250  # the SDK's RXPACKET_MAX_LEN


class Instruction(enum.IntEnum):
    """The instructions the STS/SMS series answer: exactly those it shares with Dynamixel
    (same codes, same meaning)."""

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


class PacketReader(FrameReader[Packet]):
    """Cuts a byte stream into packets, skipping noise and packets with a bad checksum.

    Feed it what the port delivered; it keeps an incomplete tail for the next feed.
    """

    min_size = 4
    kept_tail = 1  # a trailing 0xFF may be the first half of the next header
    marker_size = 2

    @property
    def bad_checksums(self) -> int:
        return self.bad_frames

    def _find_header(self, buf: bytearray) -> int:
        return buf.find(HEADER)

    def _packet_size(self, buf: bytearray) -> int | None:
        motor_id, length = buf[2], buf[3]
        if motor_id > BROADCAST_ID or not 2 <= length <= _MAX_LENGTH:
            return None
        return length + 4

    def _intact(self, frame: bytes) -> bool:
        return checksum(frame[2:-1]) == frame[-1]

    def _decode(self, frame: bytes) -> Packet:
        return Packet(frame[2], frame[4], frame[5:-1])


# Parameters of the instructions a servo answers, in the order the SDK writes them.


def read_params(address: int, length: int) -> bytes:
    return bytes([address, length])


def write_params(address: int, data: bytes) -> bytes:
    return bytes([address]) + data


def sync_read_params(address: int, length: int, ids: list[int]) -> bytes:
    return bytes([address, length, *ids])


def sync_write_params(address: int, length: int, data_by_id: dict[int, bytes]) -> bytes:
    return pack_entries(bytes([address, length]), data_by_id)


def parse_sync_write(params: bytes) -> tuple[int, int, dict[int, bytes]]:
    address, length = params[0], params[1]
    return address, length, split_entries(params[2:], length)
