"""Frames at timestamps through PyAV, with files kept open and decoding resumed where it stopped.

Random reads of a LeRobot dataset ask for a few nearby timestamps per item. LeRobot opens the
file, seeks and decodes for every item; here each file stays open, queries are served in time
order, and a query just ahead of the last decoded frame continues decoding instead of seeking.
Only the frames returned are converted to RGB.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import av
import numpy as np

from rlctl.adapters.video.errors import CORRUPT_HINT, ensure_file, translated
from rlctl.adapters.video.frame_matching import check_tolerance
from rlctl.adapters.video.open_files import OpenFiles
from rlctl.domain.errors import VideoError

BACKEND = "pyav"
# Until a file shows how far apart its keyframes are, decode forward at most this far.
_DEFAULT_FORWARD_WINDOW_S = 0.5
# Seeking costs about as much as decoding this many frames (decoder flush and restart).
_SEEK_COST_FRAMES = 2


class _Decoded:
    """A decoded frame, converted to RGB only when it is returned."""

    __slots__ = ("_rgb", "frame", "time")

    def __init__(self, frame: av.VideoFrame, time: float) -> None:
        self.frame = frame
        self.time = time
        self._rgb: np.ndarray | None = None

    def rgb(self) -> np.ndarray:
        if self._rgb is None:
            # One scaling thread: frames are small and a thread pool per call costs more.
            self._rgb = self.frame.to_ndarray(format="rgb24", threads=1)
        return self._rgb


class _OpenVideo:
    """One open file and where its decoder stands: the last two frames decoded."""

    def __init__(self, path: Path, threads: int, source: Any = None) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.container = av.open(str(path) if source is None else source, mode="r")
        try:
            self.stream = self.container.streams.video[0]
        except IndexError:
            self.container.close()
            raise VideoError(
                "the file has no video stream", where=str(path), hint=CORRUPT_HINT
            ) from None
        # Random access decodes two or three frames per seek, where a threaded decoder's start-up
        # and pipeline delay cost more than they save; parallelism comes from DataLoader workers.
        self.stream.codec_context.thread_count = threads
        self.stream.thread_type = "SLICE" if threads == 1 else "AUTO"
        self.time_base = self.stream.time_base
        frame_rate = self.stream.average_rate or self.stream.guessed_rate
        self.frame_interval_s = 1.0 / float(frame_rate) if frame_rate else 0.1
        self.keyframe_interval_s: float | None = None
        self._last_keyframe_s: float | None = None
        self._frames: Iterator[av.VideoFrame] | None = None
        self._before: _Decoded | None = None
        self._current: _Decoded | None = None
        self._exhausted = False

    def close(self) -> None:
        self._frames = None
        self._before = self._current = None
        self.container.close()

    def nearest(self, timestamp: float) -> _Decoded:
        """The decoded frame nearest `timestamp`; the earlier one on a tie, as LeRobot picks."""
        if self._must_seek(timestamp):
            self._seek(timestamp)
        while not self._exhausted and (self._current is None or self._current.time < timestamp):
            self._advance()
        candidates = [d for d in (self._before, self._current) if d is not None]
        if not candidates:
            raise VideoError(
                f"no frame could be decoded at or after {timestamp:.4f} s",
                where=str(self.path),
                hint=CORRUPT_HINT,
            )
        return min(candidates, key=lambda d: abs(d.time - timestamp))

    def _must_seek(self, timestamp: float) -> bool:
        if self._current is None:
            return True
        anchor = self._before or self._current
        if timestamp < anchor.time:
            return True
        if self._exhausted:
            return False
        gap = timestamp - self._current.time
        window = (
            self.keyframe_interval_s + _SEEK_COST_FRAMES * self.frame_interval_s
            if self.keyframe_interval_s is not None
            else _DEFAULT_FORWARD_WINDOW_S
        )
        return gap > window

    def _seek(self, timestamp: float) -> None:
        # Lands on the last keyframe at or before the timestamp, so the frame just before it is
        # decoded too. PyAV flushes the decoder on seek.
        target = max(0, round(timestamp / self.time_base))
        self.container.seek(target, stream=self.stream, backward=True, any_frame=False)
        self._frames = self.container.decode(self.stream)
        self._before = self._current = None
        self._exhausted = False
        self._last_keyframe_s = None

    def _advance(self) -> None:
        assert self._frames is not None
        for frame in self._frames:
            if frame.pts is None:
                continue
            decoded = _Decoded(frame, float(frame.pts * self.time_base))
            self._note_keyframe(frame, decoded.time)
            self._before, self._current = self._current, decoded
            return
        self._exhausted = True

    def _note_keyframe(self, frame: av.VideoFrame, time: float) -> None:
        # Learn the GOP length from consecutive keyframes, to know when seeking pays.
        if not frame.key_frame:
            return
        if self._last_keyframe_s is not None and time > self._last_keyframe_s:
            spacing = time - self._last_keyframe_s
            if self.keyframe_interval_s is None or spacing < self.keyframe_interval_s:
                self.keyframe_interval_s = spacing
        self._last_keyframe_s = time


class PyAVVideoDecoder:
    """`VideoDecoder` on PyAV. Safe across fork (children reopen files) and across threads."""

    def __init__(
        self,
        max_open_files: int = 64,
        threads: int = 1,
        source: Callable[[Path], Any] | None = None,
    ) -> None:
        """`threads`: decoder threads per file, 0 for one per core (helps large frames).
        `source`: what a path is read from (a seekable binary file, e.g. one streamed from the
        Hub), instead of the local file at that path."""
        self._threads = threads
        self._source = source
        self._files: OpenFiles[_OpenVideo] = OpenFiles(
            self._open, _OpenVideo.close, max_open=max_open_files
        )

    def decode(self, path: Path, timestamps: Sequence[float], tolerance_s: float) -> np.ndarray:
        path = Path(path)
        queries = [float(t) for t in timestamps]
        if not queries:
            raise VideoError("no timestamps to decode", where=str(path))
        video = self._files.get(path)
        try:
            with video.lock, translated(path, "decode video frames"):
                found = _nearest_frames(video, queries)
        except Exception:
            # A failed decode leaves the decoder in an unknown place: start afresh next time.
            self._files.discard(path)
            raise
        check_tolerance(path, queries, [d.time for d in found], tolerance_s, BACKEND)
        return np.stack([d.rgb() for d in found])

    def close(self) -> None:
        self._files.clear()

    def _open(self, path: Path) -> _OpenVideo:
        if self._source is None:
            ensure_file(path)
        source = None if self._source is None else self._source(path)
        with translated(path, "open video"):
            return _OpenVideo(path, self._threads, source)


def _nearest_frames(video: _OpenVideo, queries: list[float]) -> list[_Decoded]:
    """Serve queries in time order, so one forward pass covers them, and answer in asked order."""
    found: list[_Decoded | None] = [None] * len(queries)
    for i in sorted(range(len(queries)), key=queries.__getitem__):
        found[i] = video.nearest(queries[i])
    return [d for d in found if d is not None]
