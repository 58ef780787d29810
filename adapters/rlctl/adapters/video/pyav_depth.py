"""Depth videos with PyAV: 12-bit codes in and out of gray12le frames, as LeRobot 0.6.1 does.

LeRobot decodes depth videos with PyAV only (torchcodec returns 8-bit pictures): it seeks to the
keyframe before the first query, decodes forward to the last, and answers each query with the
nearest frame. The same here, file by file (but see the seek below); the caller dequantizes.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import av
import numpy as np

from rlctl.adapters.video.errors import ensure_file, translated
from rlctl.adapters.video.frame_matching import check_tolerance
from rlctl.domain.depth import DEPTH_PIX_FMT, DepthQuantization
from rlctl.domain.errors import InvalidInput, VideoError

BACKEND = "pyav (depth)"


# Seek targets tried in turn, in seconds before the first query: LeRobot's one-tick margin, then
# further back, then the file's start (None). See `decode_depth_codes`.
_SEEK_BACKS: tuple[float | None, ...] = (0.0, 1.0, None)


def decode_depth_codes(path: Path, timestamps: Iterable[float], tolerance_s: float) -> np.ndarray:
    """The codes (uint16, `(len(timestamps), H, W)`) of the frames nearest to `timestamps`.

    LeRobot seeks once, one tick before the first query. With x265's B-frames an mp4 seek can
    land on a keyframe after the query, or on the last keyframe of the episode before, after
    which the decoder drops the next episode's first frames: LeRobot 0.6.1 then raises for items
    it wrote itself. Here a seek that misses a queried frame is retried from further back.
    """
    ensure_file(path)
    queries = [float(t) for t in timestamps]
    for back in _SEEK_BACKS:
        start = None if back is None else min(queries) - back
        codes, times = _decode(path, start, max(queries))
        found = np.asarray(times)
        nearest = [int(np.argmin(np.abs(found - query))) for query in queries]
        if back is None or all(
            abs(times[i] - query) < tolerance_s for i, query in zip(nearest, queries)
        ):
            break
    check_tolerance(path, queries, [times[i] for i in nearest], tolerance_s, BACKEND)
    return np.stack([codes[i] for i in nearest])


def _decode(path: Path, start: float | None, last: float) -> tuple[list[np.ndarray], list[float]]:
    """Codes and times of the frames from a seek to `start` (None: the file's start) to `last`."""
    codes: list[np.ndarray] = []
    times: list[float] = []
    with translated(path, "decode the depth video"), av.open(str(path)) as container:
        stream = container.streams.video[0]
        if start is not None:
            container.seek(
                max(0, round(start / stream.time_base) - 1),
                backward=True,
                any_frame=False,
                stream=stream,
            )
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            time = float(frame.pts * stream.time_base)
            codes.append(frame.to_ndarray(format=DEPTH_PIX_FMT))
            times.append(time)
            if time >= last:
                break
    if not codes:
        raise VideoError(
            f"no depth frame could be decoded up to {last:.4f} s",
            where=str(path),
            hint="the file may be truncated; re-download the dataset or re-record the episode",
        )
    return codes, times


def depth_picture(
    frame: np.ndarray, quantization: DepthQuantization, pix_fmt: str, where: Path
) -> av.VideoFrame:
    """A depth map `(H, W[, 1])` (uint16 mm or float32 m) quantized into a 12-bit gray frame."""
    depth = frame[..., 0] if frame.ndim == 3 and frame.shape[2] == 1 else frame
    if depth.ndim != 2:
        raise InvalidInput(
            f"a depth frame must be (height, width) or (height, width, 1), got {frame.shape}",
            where=str(where),
        )
    codes = quantization.quantize(depth)
    picture = av.VideoFrame(codes.shape[1], codes.shape[0], pix_fmt)
    # Rows of a plane are padded to `line_size` bytes: copy the visible width of each.
    plane = picture.planes[0]
    stride = plane.line_size // codes.itemsize
    rows = np.frombuffer(plane, dtype=np.uint16).reshape(codes.shape[0], stride)
    rows[:, : codes.shape[1]] = codes
    return picture
