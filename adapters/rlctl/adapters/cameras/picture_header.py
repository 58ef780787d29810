"""A picture's size from its JPEG or PNG header, read before it is decoded: a hostile or broken
sender could claim any size in a tiny file, and decoding it would allocate that much."""

from __future__ import annotations

import struct

# A picture claiming more than this on a side is refused before it is decoded.
MAX_PICTURE_SIDE = 8192


def picture_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a JPEG's or PNG's header, without decoding it; None when `data` is
    neither or its header is broken."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        # Start of frame (baseline, progressive, …; not DHT, JPG or DAC).
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(width), int(height)
        if marker == 0xDA or length < 2:  # scan data before any frame header
            return None
        i += 2 + length
    return None
