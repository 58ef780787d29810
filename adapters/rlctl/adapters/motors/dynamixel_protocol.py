"""Dynamixel Protocol 2.0 wire format: framing, byte stuffing, CRC-16 and instruction parameters.

    FF FF FD 00 | ID | LEN_L LEN_H | INSTRUCTION | PARAMS… | CRC_L CRC_H

LEN counts the instruction, the (stuffed) parameters and the CRC. Inside instruction+parameters
every FF FF FD gets an extra FD, so the header never appears in a payload; the CRC (polynomial
0x8005, initial value 0, no reflection) covers the stuffed packet from the first header byte.
Status packets are instruction 0x55 whose first parameter is the error byte.
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

HEADER = b"\xff\xff\xfd\x00"
_MAX_LENGTH = 1024  # the SDK's RXPACKET_MAX_LEN


class Instruction(enum.IntEnum):
    # The first seven are Feetech's too (same codes, same meaning).
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83
    FACTORY_RESET = 0x06
    REBOOT = 0x08
    CLEAR = 0x10
    STATUS = 0x55
    BULK_READ = 0x92
    BULK_WRITE = 0x93


class ErrorNumber(enum.IntEnum):
    """The low seven bits of a status packet's error byte."""

    NONE = 0
    RESULT_FAIL = 1
    INSTRUCTION = 2
    CRC = 3
    DATA_RANGE = 4
    DATA_LENGTH = 5
    DATA_LIMIT = 6
    ACCESS = 7


ALERT = 0x80  # a hardware error is latched: see the Hardware_Error_Status register


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _crc_table()


def crc16(data: bytes, crc: int = 0) -> int:
    for byte in data:
        crc = ((crc << 8) ^ _CRC_TABLE[((crc >> 8) ^ byte) & 0xFF]) & 0xFFFF
    return crc


def stuff(payload: bytes) -> bytes:
    out = bytearray()
    for i, byte in enumerate(payload):
        out.append(byte)
        if byte == 0xFD and i >= 2 and payload[i - 1] == 0xFF and payload[i - 2] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def unstuff(payload: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(payload):
        out.append(payload[i])
        if payload[i : i + 2] == b"\xfd\xfd" and out[-3:] == b"\xff\xff\xfd":
            i += 1  # drop the stuffed FD
        i += 1
    return bytes(out)


@attrs.frozen
class Packet:
    id: int
    instruction: int
    params: bytes = b""

    def encode(self) -> bytes:
        payload = stuff(bytes([self.instruction]) + self.params)
        length = len(payload) + 2
        head = HEADER + bytes([self.id, length & 0xFF, length >> 8])
        body = head + payload
        crc = crc16(body)
        return body + bytes([crc & 0xFF, crc >> 8])

    @property
    def error(self) -> int:
        """A status packet's error byte."""
        return self.params[0]

    @property
    def data(self) -> bytes:
        """A status packet's parameters after the error byte."""
        return self.params[1:]


def instruction(motor_id: int, op: Instruction, params: bytes = b"") -> bytes:
    return Packet(motor_id, op, params).encode()


def status(motor_id: int, error: int = 0, data: bytes = b"") -> bytes:
    return Packet(motor_id, Instruction.STATUS, bytes([error]) + data).encode()


class PacketReader(FrameReader[Packet]):
    """Cuts a byte stream into packets, skipping noise and packets with a bad CRC."""

    min_size = 10
    kept_tail = 2
    marker_size = 3

    @property
    def bad_crcs(self) -> int:
        return self.bad_frames

    def _find_header(self, buf: bytearray) -> int:
        # FF FF FD FD is a stuffed payload, not a header (the SDK's rule too).
        start = 0
        while True:
            idx = buf.find(b"\xff\xff\xfd", start)
            if idx < 0 or idx + 3 >= len(buf) or buf[idx + 3] != 0xFD:
                return idx
            start = idx + 1

    def _packet_size(self, buf: bytearray) -> int | None:
        length = buf[5] | (buf[6] << 8)
        if buf[3] != 0x00 or buf[4] > BROADCAST_ID or not 3 <= length <= _MAX_LENGTH:
            return None
        return 7 + length

    def _intact(self, frame: bytes) -> bool:
        return crc16(frame[:-2]) == (frame[-2] | (frame[-1] << 8))

    def _decode(self, frame: bytes) -> Packet:
        payload = unstuff(frame[7:-2])
        return Packet(frame[4], payload[0], payload[1:])


def _word(value: int) -> bytes:
    return bytes([value & 0xFF, value >> 8])


def read_params(address: int, length: int) -> bytes:
    return _word(address) + _word(length)


def write_params(address: int, data: bytes) -> bytes:
    return _word(address) + data


def sync_read_params(address: int, length: int, ids: list[int]) -> bytes:
    return _word(address) + _word(length) + bytes(ids)


def sync_write_params(address: int, length: int, data_by_id: dict[int, bytes]) -> bytes:
    return pack_entries(_word(address) + _word(length), data_by_id)


def parse_address_length(params: bytes) -> tuple[int, int]:
    return params[0] | (params[1] << 8), params[2] | (params[3] << 8)


def parse_sync_write(params: bytes) -> tuple[int, int, dict[int, bytes]]:
    address, length = parse_address_length(params)
    return address, length, split_entries(params[4:], length)


def parse_bulk_read(params: bytes) -> list[tuple[int, int, int]]:
    """(id, address, length) per motor: ID, ADDR_L, ADDR_H, LEN_L, LEN_H repeated."""
    return [
        (params[i], params[i + 1] | (params[i + 2] << 8), params[i + 3] | (params[i + 4] << 8))
        for i in range(0, len(params) - 4, 5)
    ]
