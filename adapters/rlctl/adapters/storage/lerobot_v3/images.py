"""Image features stored inside the data parquet: `{bytes, path}` structs holding PNG files.

Decoded to what LeRobot's `__getitem__` returns for them (torchvision's `ToTensor`): float32,
channels first, in [0, 1]; 16-bit images (depth maps) keep their raw values as float32.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa

from rlctl.adapters.storage.lerobot_v3.errors import read_bytes
from rlctl.domain.errors import CorruptDataset

# One encoded picture; a 16k x 16k 16-bit PNG stays well below.
MAX_IMAGE_FILE_BYTES = 1 << 30

try:  # Pillow is the fast path; PyAV (always installed with rlctl's video adapters) the fallback.
    from PIL import Image as _PILImage
except ImportError:  # pragma: no cover - depends on the environment
    _PILImage = None  # type: ignore[assignment]  # the fallback below checks for None


class ImageColumn:
    """One image column of the selected rows; `chw(row)` decodes one image."""

    def __init__(self, key: str, column: pa.Array, root: Path, source: str) -> None:
        self.key = key
        self._root = root
        self._source = source
        if pa.types.is_struct(column.type):
            names = [column.type.field(i).name for i in range(column.type.num_fields)]
            self._bytes = column.field("bytes") if "bytes" in names else None
            self._paths = column.field("path") if "path" in names else None
        elif pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            self._bytes, self._paths = column, None
        else:
            raise CorruptDataset(
                f"image feature {key!r} is stored as {column.type}, not as image bytes",
                where=f"{source}: {key}",
                hint="image features are {bytes, path} structs holding PNG files",
            )

    def encoded(self, row: int) -> bytes:
        data = self._bytes[row].as_py() if self._bytes is not None else None
        if data is not None:
            return data
        path = self._paths[row].as_py() if self._paths is not None else None
        if not path:
            raise CorruptDataset(
                f"row {row} of image feature {self.key!r} holds neither bytes nor a path",
                where=f"{self._source}: {self.key}",
                hint="rewrite the dataset with embedded images",
            )
        file = Path(path) if Path(path).is_absolute() else self._root / path
        try:
            # A path from the data may name a FIFO or a device: only a regular file is read.
            return read_bytes(file, "image file", self._root, max_bytes=MAX_IMAGE_FILE_BYTES)
        except CorruptDataset as err:
            raise CorruptDataset(
                f"image file of row {row}: {err.message}", where=err.where, hint=err.hint
            ) from err
        except OSError as err:
            raise CorruptDataset(
                f"image file of row {row} cannot be read ({err.strerror})",
                where=str(file),
                hint="the dataset's images are not embedded and this file is missing",
            ) from err

    def chw(self, row: int) -> np.ndarray:
        try:
            return to_chw_float(decode_image(self.encoded(row)))
        except CorruptDataset:
            raise
        except Exception as err:
            raise CorruptDataset(
                f"image of row {row} cannot be decoded: {type(err).__name__}: {err}",
                where=f"{self._source}: {self.key}",
                hint="the stored image is damaged; rewrite the episode",
            ) from err


def decode_image(data: bytes) -> np.ndarray:
    """An encoded image as an array (H, W) or (H, W, C), in its stored dtype."""
    if _PILImage is not None:
        with _PILImage.open(io.BytesIO(data)) as image:
            array = np.array(image)
            if image.mode == "1":
                array = array.astype(np.uint8) * 255
            return array
    return _decode_with_av(data)


def _decode_with_av(data: bytes) -> np.ndarray:
    import av

    with av.open(io.BytesIO(data), mode="r") as container:
        frame = next(container.decode(video=0))
        gray = frame.format.name.startswith("gray")
        return frame.to_ndarray(format="gray" if gray else "rgb24")


def to_chw_float(array: np.ndarray) -> np.ndarray:
    """(H, W[, C]) -> float32 (C, H, W); 8-bit values scaled to [0, 1], as `ToTensor` does."""
    if array.ndim == 2:
        array = array[:, :, None]
    chw = array.transpose(2, 0, 1)
    if array.dtype == np.uint8:
        return np.ascontiguousarray(chw, dtype=np.float32) / np.float32(255)
    return np.ascontiguousarray(chw, dtype=np.float32)
