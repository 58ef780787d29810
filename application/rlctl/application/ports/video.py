"""Ports for video: reading frames at timestamps, and writing frames into mp4 files.

Frames are numpy arrays, uint8, (height, width, channels) (RGB). Timestamps are seconds from the
start of the file, so a LeRobot item's frame is at `from_timestamp + frame_timestamp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, Self

import numpy as np

from rlctl.domain.video import VideoEncoding, VideoSegment, VideoStreamInfo


class VideoDecoder(Protocol):
    """Reads frames from video files; implementations may keep files open between calls."""

    def decode(self, path: Path, timestamps: Sequence[float], tolerance_s: float) -> np.ndarray:
        """The frame nearest each timestamp, in the order asked, as uint8 (N, H, W, C).

        Raises `VideoTimestampError` when the nearest frame is `tolerance_s` or farther from a
        timestamp (LeRobot's default tolerance is `1/fps - 1e-4`), `VideoError` when the file is
        missing or unreadable.
        """
        ...

    def close(self) -> None:
        """Release every open file; the decoder may be used again afterwards."""
        ...


class VideoWriter(Protocol):
    """One mp4 being written. Frames of consecutive episodes go into it back to back."""

    def add_frame(self, frame: np.ndarray) -> None:
        """Append one uint8 (H, W, C) frame; its timestamp is frames-so-far / fps."""
        ...

    def end_segment(self) -> VideoSegment:
        """Close the current episode's run of frames and return its span in the file."""
        ...

    def finish(self) -> VideoStreamInfo:
        """End the open segment, flush, and publish the file at its path (invisible until then)."""
        ...

    def abort(self) -> None:
        """Drop the file being written; nothing appears at its path."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, exc_type: object, exc: object, traceback: object, /) -> None:
        """Finish on success, abort on an exception."""
        ...


class VideoEncoder(Protocol):
    """Writes, joins and inspects mp4 files."""

    def begin(self, path: Path, fps: int, encoding: VideoEncoding) -> VideoWriter:
        """Start a file at `path` (replaced when finished); the first frame sets its size."""
        ...

    def concatenate(self, inputs: Sequence[Path], output: Path) -> list[VideoSegment]:
        """Join files with equal stream parameters without re-encoding; `output` may be an input.

        Returns each input's span inside `output`, in order.
        """
        ...

    def probe(self, path: Path) -> VideoStreamInfo:
        """Size, rate, codec, pixel format, frame count and duration of a video file."""
        ...
