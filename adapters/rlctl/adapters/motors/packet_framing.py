"""What the Feetech and Dynamixel wire protocols share.

Feetech's SCS protocol is a copy of Dynamixel's Protocol 1.0, and Protocol 2.0 kept its ids and
instruction codes: both reserve 0xFE for broadcast, both answer the same basic instructions, and
both pack a sync write as the same run of (id, data) entries after a header. Both streams are cut
into packets the same way; only where a header starts, how long a packet is and what checks it
differ, and `FrameReader` leaves exactly those to each protocol.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

BROADCAST_ID = 0xFE
MAX_ID = 0xFC


class FrameReader[P]:
    """Cuts a byte stream into packets: skips noise before a header, keeps a packet that has not
    all arrived for the next feed, and drops (and counts in `bad_frames`) packets that fail their
    integrity check. Feed it what the port delivered."""

    # Bytes needed before `_packet_size` can read the length.
    min_size: int
    # Bytes kept when no header is found: they may be the start of the next one.
    kept_tail: int
    # Bytes skipped past a header whose packet fails its check, to look for the next header.
    marker_size: int

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.bad_frames = 0

    def feed(self, data: bytes) -> list[P]:
        self._buffer += data
        return list(self._drain())

    def _find_header(self, buf: bytearray) -> int:
        raise NotImplementedError

    def _packet_size(self, buf: bytearray) -> int | None:
        """The whole packet's length in bytes, None when the header's fields are impossible."""
        raise NotImplementedError

    def _intact(self, frame: bytes) -> bool:
        raise NotImplementedError

    def _decode(self, frame: bytes) -> P:
        raise NotImplementedError

    def _drain(self) -> Iterator[P]:
        buf = self._buffer
        while True:
            start = self._find_header(buf)
            if start < 0:
                del buf[: max(0, len(buf) - self.kept_tail)]
                return
            del buf[:start]
            if len(buf) < self.min_size:
                return
            total = self._packet_size(buf)
            if total is None:
                del buf[:1]  # not a header after all (e.g. FF FF FF); resynchronise
                continue
            if len(buf) < total:
                return
            frame = bytes(buf[:total])
            if not self._intact(frame):
                self.bad_frames += 1
                del buf[: self.marker_size]
                continue
            del buf[:total]
            yield self._decode(frame)


def pack_entries(head: bytes, data_by_id: Mapping[int, bytes]) -> bytes:
    """A sync write's parameters: `head` (address and length), then each motor's id and data."""
    out = bytearray(head)
    for motor_id, data in data_by_id.items():
        out += bytes([motor_id]) + data
    return bytes(out)


def split_entries(entries: bytes, length: int) -> dict[int, bytes]:
    """The (id, `length` bytes of data) entries of a sync write, by id."""
    step = length + 1
    return {entries[i]: bytes(entries[i + 1 : i + step]) for i in range(0, len(entries), step)}
