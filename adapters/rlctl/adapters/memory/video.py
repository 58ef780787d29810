"""Videos kept as lists of frames in a dict: the video ports without codecs, lossless and instant.

`InMemoryVideos` is both a `VideoEncoder` and a `VideoDecoder`, so a use case that records and
then reads back sees its own frames. Frame k of a file is at k / fps, as in the real files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Self

import attrs
import numpy as np

from rlctl.adapters.video.frame_matching import check_tolerance
from rlctl.domain.errors import InvalidInput, VideoError
from rlctl.domain.video import VideoEncoding, VideoSegment, VideoStreamInfo

BACKEND = "memory"


@attrs.define
class StoredVideo:
    fps: int
    encoding: VideoEncoding
    frames: list[np.ndarray]

    def info(self) -> VideoStreamInfo:
        height, width, _ = self.frames[0].shape
        return VideoStreamInfo(
            width=width,
            height=height,
            fps=float(self.fps),
            codec=self.encoding.stream_codec,
            pix_fmt=self.encoding.pix_fmt,
            frame_count=len(self.frames),
            duration_s=len(self.frames) / self.fps,
        )


class InMemoryVideoWriter:
    """`VideoWriter` whose file appears in the store when finished, and never if aborted."""

    def __init__(self, store: InMemoryVideos, path: Path, fps: int, encoding: VideoEncoding):
        self._store = store
        self._path = Path(path)
        self._video = StoredVideo(fps, encoding, [])
        self._segment_start = 0
        self.segments: list[VideoSegment] = []

    def add_frame(self, frame: np.ndarray) -> None:
        frame = np.asarray(frame)
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise InvalidInput(
                f"a video frame must be uint8 (height, width, 3), got {frame.dtype} {frame.shape}",
                where=str(self._path),
            )
        if self._video.frames and frame.shape != self._video.frames[0].shape:
            raise InvalidInput(f"frame has shape {frame.shape}", where=str(self._path))
        self._video.frames.append(frame.copy())

    def end_segment(self) -> VideoSegment:
        end = len(self._video.frames)
        if end == self._segment_start:
            raise InvalidInput("no frames were added since the last segment", where=str(self._path))
        fps = self._video.fps
        segment = VideoSegment(self._segment_start / fps, end / fps, end - self._segment_start)
        self.segments.append(segment)
        self._segment_start = end
        return segment

    def finish(self) -> VideoStreamInfo:
        if not self._video.frames:
            raise VideoError("no frames were added", where=str(self._path))
        if len(self._video.frames) > self._segment_start:
            self.end_segment()
        self._store.files[self._path] = self._video
        return self._video.info()

    def abort(self) -> None:
        self._video.frames.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()


class InMemoryVideos:
    """`VideoEncoder` and `VideoDecoder` over `files`, a dict of path to `StoredVideo`."""

    def __init__(self) -> None:
        self.files: dict[Path, StoredVideo] = {}

    def begin(self, path: Path, fps: int, encoding: VideoEncoding) -> InMemoryVideoWriter:
        return InMemoryVideoWriter(self, path, fps, encoding)

    def concatenate(self, inputs: Sequence[Path], output: Path) -> list[VideoSegment]:
        videos = [self._get(path) for path in inputs]
        if not videos:
            raise InvalidInput("no video files to concatenate", where=str(output))
        first = videos[0]
        segments, start = [], 0
        for path, video in zip(inputs, videos, strict=True):
            if video.fps != first.fps or video.frames[0].shape != first.frames[0].shape:
                raise VideoError("cannot join videos with different fps or size", where=str(path))
            count = len(video.frames)
            segments.append(VideoSegment(start / first.fps, (start + count) / first.fps, count))
            start += count
        frames = [frame for video in videos for frame in video.frames]
        self.files[Path(output)] = StoredVideo(first.fps, first.encoding, frames)
        return segments

    def probe(self, path: Path) -> VideoStreamInfo:
        return self._get(path).info()

    def decode(self, path: Path, timestamps: Sequence[float], tolerance_s: float) -> np.ndarray:
        video = self._get(path)
        last = len(video.frames) - 1
        indices = [min(max(round(t * video.fps), 0), last) for t in timestamps]
        found = [i / video.fps for i in indices]
        check_tolerance(Path(path), list(timestamps), found, tolerance_s, BACKEND)
        return np.stack([video.frames[i] for i in indices])

    def close(self) -> None:
        pass

    def _get(self, path: Path) -> StoredVideo:
        video = self.files.get(Path(path))
        if video is None:
            raise VideoError("video file not found", where=str(path))
        return video
