"""A small PNG encoder for uint8 images, for image features stored inside the data parquet;
depth maps go into raw TIFFs instead, as LeRobot stores them.

LeRobot stores such images as PNG bytes (written by PIL). Encoding here needs only numpy and zlib:
no extra dependency, and zlib releases the GIL, so a thread pool encodes cameras in parallel.
Every row uses the "Up" filter (difference with the row above), which compresses camera images
about as well as PIL's adaptive choice at a fraction of the cost.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> grey, grey+alpha, RGB, RGBA
_FILTER_UP = 2


def _chunk(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(kind))
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def encode_png(image: np.ndarray, compress_level: int = 6) -> bytes:
    """PNG bytes of a uint8 image shaped (H, W) or (H, W, C) with C in 1..4."""
    if image.dtype != np.uint8:
        raise ValueError(f"PNG encoding needs uint8 pixels, got {image.dtype}")
    if image.ndim == 2:
        image = image[:, :, None]
    height, width, channels = image.shape
    if channels not in _COLOR_TYPES:
        raise ValueError(f"PNG encoding needs 1 to 4 channels, got {channels}")
    rows = image.reshape(height, width * channels)
    filtered = np.empty((height, width * channels + 1), dtype=np.uint8)
    filtered[:, 0] = _FILTER_UP
    filtered[0, 1:] = rows[0]
    # uint8 arithmetic wraps modulo 256, which is exactly the PNG filter's definition.
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPES[channels], 0, 0, 0)
    return b"".join(
        (
            _SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(filtered.tobytes(), compress_level)),
            _chunk(b"IEND", b""),
        )
    )


def encode_depth_tiff(depth: np.ndarray, _compress_level: int = 0) -> bytes:
    """An uncompressed TIFF of a depth map (H, W[, 1]), uint16 ("I;16") or float32 ("F"),
    as LeRobot's image writer saves one (`compression="raw"`)."""
    from PIL import Image

    plane = depth[..., 0] if depth.ndim == 3 else depth
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(plane)).save(buffer, format="TIFF", compression="raw")
    return buffer.getvalue()
