"""Frames at timestamps through torchcodec, one decoder per file and per process.

As LeRobot does, a timestamp becomes the frame index `round(t * fps)`; the frame there is then
checked against the tolerance. Where the stream's timing is irregular and that frame is not the
nearest, its neighbour towards the timestamp is tried.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from torchcodec.decoders import VideoDecoder as _TorchCodecDecoder

from rlctl.adapters.video.errors import TORCHCODEC_HINT, ensure_file, translated
from rlctl.adapters.video.frame_matching import check_tolerance
from rlctl.adapters.video.open_files import OpenFiles
from rlctl.domain.errors import VideoError

BACKEND = "torchcodec"

SeekMode = Literal["exact", "approximate"]


class _OpenVideo:
    def __init__(self, path: Path, seek_mode: SeekMode, threads: int, source: Any = None) -> None:
        self.lock = threading.Lock()  # a torchcodec decoder holds one position in the file
        self.decoder = _TorchCodecDecoder(
            str(path) if source is None else source,
            dimension_order="NHWC",
            seek_mode=seek_mode,
            num_ffmpeg_threads=threads,
        )
        metadata = self.decoder.metadata
        fps = metadata.average_fps
        if not fps:
            raise VideoError("the video stream declares no frame rate", where=str(path))
        self.fps = float(fps)
        self.begin_s = float(metadata.begin_stream_seconds or 0.0)
        self.frame_count = metadata.num_frames

    def index_of(self, timestamp: float) -> int:
        return self.clamp(round((timestamp - self.begin_s) * self.fps))

    def clamp(self, index: int) -> int:
        index = max(0, index)
        return index if self.frame_count is None else min(index, self.frame_count - 1)

    def frames_at(self, indices: list[int]) -> tuple[np.ndarray, list[float]]:
        batch = self.decoder.get_frames_at(indices=indices)
        return np.ascontiguousarray(batch.data.numpy()), batch.pts_seconds.tolist()


class TorchCodecVideoDecoder:
    """`VideoDecoder` on torchcodec (CPU). Needs the system's ffmpeg libraries at run time."""

    def __init__(
        self,
        max_open_files: int = 64,
        seek_mode: SeekMode = "approximate",
        threads: int = 1,
        source: Callable[[Path], Any] | None = None,
    ) -> None:
        """`source`: what a path is read from (a seekable binary file, e.g. one streamed from
        the Hub), instead of the local file at that path."""
        self._seek_mode = seek_mode
        self._threads = threads
        self._source = source
        self._files: OpenFiles[_OpenVideo] = OpenFiles(
            self._open, lambda _video: None, max_open=max_open_files
        )

    def decode(self, path: Path, timestamps: Sequence[float], tolerance_s: float) -> np.ndarray:
        path = Path(path)
        queries = [float(t) for t in timestamps]
        if not queries:
            raise VideoError("no timestamps to decode", where=str(path))
        video = self._files.get(path)
        try:
            with video.lock, translated(path, "decode video frames", hint=TORCHCODEC_HINT):
                frames, times = _nearest_frames(video, queries)
        except VideoError:
            self._files.discard(path)  # the file may have changed under it: reopen next time
            raise
        check_tolerance(path, queries, times, tolerance_s, BACKEND)
        return frames

    def close(self) -> None:
        self._files.clear()

    def _open(self, path: Path) -> _OpenVideo:
        if self._source is None:
            ensure_file(path)
        source = None if self._source is None else self._source(path)
        with translated(path, "open video with torchcodec", hint=TORCHCODEC_HINT):
            return _OpenVideo(path, self._seek_mode, self._threads, source)


def _nearest_frames(video: _OpenVideo, queries: list[float]) -> tuple[np.ndarray, list[float]]:
    indices = [video.index_of(t) for t in queries]
    frames, times = video.frames_at(indices)
    half_frame = 0.5 / video.fps
    retry = [i for i, t in enumerate(queries) if abs(times[i] - t) > half_frame]
    if not retry:
        return frames, times
    neighbours = [video.clamp(indices[i] + (1 if queries[i] > times[i] else -1)) for i in retry]
    more_frames, more_times = video.frames_at(neighbours)
    for slot, i in enumerate(retry):
        if abs(more_times[slot] - queries[i]) < abs(times[i] - queries[i]):
            frames[i] = more_frames[slot]
            times[i] = more_times[slot]
    return frames, times
