"""FashionStar UART smart servos' wire protocol (the reBot Arm 102 leader's), as
`motorbridge-smart-servo` 0.0.4 speaks it: pure packing and parsing, shared by the bus and its
emulator.

A request is `12 4C code size params… checksum`, an answer `05 1C code size params… checksum`;
the checksum is the low byte of the sum of every byte before it. Angles are tenths of a degree,
little-endian. The commands the leader uses:

- ping (1): `[id]`, answered `[id]`;
- set stop mode (24): `[id, mode, power u16]`; mode 0x10 with power 0 unlocks (torque off);
- set origin point (23): `[id, 0]`: where the shaft is becomes 0°;
- reset multi-turn (17): `[id]`: the turn count is cleared;
- sync monitor (25): `[22, 1, n, id…]`, answered by each servo with a monitor packet (22):
  `[id, voltage mV u16, current mA u16, power mW u16, temperature u16, status u8,
  angle i32 (0.1°, multi-turn), turns i16]`.

Only ping and monitor are answered; the others are written and not acknowledged.
"""

from __future__ import annotations

import struct

import attrs

REQUEST_HEADER = b"\x12\x4c"
ANSWER_HEADER = b"\x05\x1c"

PING = 1
RESET_MULTI_TURN = 17
QUERY_MONITOR = 22
SET_ORIGIN = 23
SET_STOP_MODE = 24
SYNC_COMMAND = 25
UNLOCKED = 0x10  # the stop mode that leaves the shaft free (torque off)

MAX_ID = 253
_MONITOR = struct.Struct("<BHHHHBih")


def checksum(header: bytes, code: int, params: bytes) -> int:
    return (sum(header) + code + len(params) + sum(params)) & 0xFF


def _pack(header: bytes, code: int, params: bytes) -> bytes:
    if len(params) > 255:
        raise ValueError(f"a FashionStar packet holds at most 255 bytes, not {len(params)}")
    return header + bytes([code, len(params)]) + params + bytes([checksum(header, code, params)])


def request(code: int, params: bytes) -> bytes:
    return _pack(REQUEST_HEADER, code, params)


def answer(code: int, params: bytes) -> bytes:
    return _pack(ANSWER_HEADER, code, params)


def ping(servo_id: int) -> bytes:
    return request(PING, bytes([servo_id]))


def unlock(servo_id: int) -> bytes:
    return request(SET_STOP_MODE, struct.pack("<BBH", servo_id, UNLOCKED, 0))


def set_origin(servo_id: int) -> bytes:
    return request(SET_ORIGIN, bytes([servo_id, 0]))


def reset_multi_turn(servo_id: int) -> bytes:
    return request(RESET_MULTI_TURN, bytes([servo_id]))


def sync_monitor(ids: list[int]) -> bytes:
    return request(SYNC_COMMAND, bytes([QUERY_MONITOR, 1, len(ids), *ids]))


@attrs.frozen
class Packet:
    code: int
    params: bytes


@attrs.frozen
class Monitor:
    """A servo's monitor packet: its angle in degrees (multi-turn) and its telemetry."""

    id: int
    voltage_mv: int
    current_ma: int
    power_mw: int
    temperature: int
    status: int
    angle_deg: float
    turns: int


def encode_monitor(monitor: Monitor) -> bytes:
    return answer(
        QUERY_MONITOR,
        _MONITOR.pack(
            monitor.id,
            monitor.voltage_mv,
            monitor.current_ma,
            monitor.power_mw,
            monitor.temperature,
            monitor.status,
            round(monitor.angle_deg * 10),
            monitor.turns,
        ),
    )


def decode_monitor(packet: Packet) -> Monitor | None:
    """The monitor a packet carries, None when it is another packet or too short."""
    if packet.code != QUERY_MONITOR or len(packet.params) < 14:
        return None
    params = packet.params.ljust(_MONITOR.size, b"\x00")[: _MONITOR.size]
    servo_id, volts, amps, watts, temp, status, angle, turns = _MONITOR.unpack(params)
    return Monitor(servo_id, volts, amps, watts, temp, status, angle / 10, turns)


class PacketReader:
    """Packets out of a byte stream; bytes before a header and packets with a wrong checksum
    are dropped (counted in `bad_checksums`)."""

    def __init__(self, header: bytes) -> None:
        self._header = header
        self._buffer = bytearray()
        self.bad_checksums = 0

    def feed(self, data: bytes) -> list[Packet]:
        self._buffer += data
        packets: list[Packet] = []
        while True:
            start = self._buffer.find(self._header)
            if start < 0:
                del self._buffer[: max(0, len(self._buffer) - 1)]
                return packets
            del self._buffer[:start]
            if len(self._buffer) < 4:
                return packets
            code, size = self._buffer[2], self._buffer[3]
            end = 4 + size + 1
            if len(self._buffer) < end:
                return packets
            params = bytes(self._buffer[4 : 4 + size])
            if self._buffer[end - 1] == checksum(self._header, code, params):
                packets.append(Packet(code, params))
                del self._buffer[:end]
            else:
                self.bad_checksums += 1
                del self._buffer[:1]
