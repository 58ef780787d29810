"""Encode frames into mp4 with PyAV, with LeRobot's codec settings (AV1 by default).

Several episodes can go into one file back to back: frame n of the file is stamped n / fps, so
each episode's span (`end_segment`) is what LeRobot stores as `from_timestamp`/`to_timestamp`.
The file is written under a hidden name and renamed when finished, so a crash never leaves a
half-written mp4 at the dataset's path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Self

import av
import numpy as np

from rlctl.adapters.video.errors import translated
from rlctl.adapters.video.pyav_concat import concatenate, partial_path
from rlctl.adapters.video.pyav_depth import depth_picture
from rlctl.adapters.video.pyav_probe import probe
from rlctl.domain.errors import InvalidInput, VideoError
from rlctl.domain.video import VideoEncoding, VideoSegment, VideoStreamInfo

_ENCODER_HINT = "check the codec settings; h264 and hevc need an even width and height"
# Encoder libraries that print their banners straight to stderr, and how to quiet them.
_QUIET_OPTIONS = {"hevc": {"x265-params": "log-level=error"}}
# Deepest frame reordering an encoder may use (x264/x265 allow 16 B-frames): the first packet's
# decode time is never further than this before its presentation time.
_MAX_REORDER = 16


class PyAVVideoWriter:
    """`VideoWriter`: one mp4 under construction. Not thread-safe; one writer per file."""

    def __init__(
        self, path: Path, fps: int, encoding: VideoEncoding, threads: int | None = None
    ) -> None:
        if fps <= 0:
            raise InvalidInput(f"fps must be positive, got {fps}", where=str(path))
        self.path = Path(path)
        self.fps = fps
        self.encoding = encoding
        self._threads = threads
        self._partial = partial_path(self.path)
        self._container: av.container.OutputContainer | None = None
        self._stream: av.VideoStream | None = None
        self._shape: tuple[int, ...] | None = None
        self._frames = 0
        self._last_dts: int | None = None
        self._segment_start = 0
        self.segments: list[VideoSegment] = []
        self.stream_info: VideoStreamInfo | None = None

    @property
    def frame_count(self) -> int:
        return self._frames

    def add_frame(self, frame: np.ndarray) -> None:
        if self.encoding.depth is not None:
            frame = self._checked_depth(frame)
            picture = depth_picture(frame, self.encoding.depth, self.encoding.pix_fmt, self.path)
        else:
            frame = self._checked(frame)
            picture = av.VideoFrame.from_ndarray(frame, format="rgb24")
        if self._container is None:
            self._open(height=frame.shape[0], width=frame.shape[1])
        assert self._stream is not None
        picture.pts = self._frames
        picture.time_base = Fraction(1, self.fps)
        with translated(self.path, "encode a frame", hint=_ENCODER_HINT):
            self._mux(self._stream.encode(picture))
        self._frames += 1

    def end_segment(self) -> VideoSegment:
        count = self._frames - self._segment_start
        if count == 0:
            raise InvalidInput("no frames were added since the last segment", where=str(self.path))
        segment = VideoSegment(
            from_timestamp=self._segment_start / self.fps,
            to_timestamp=self._frames / self.fps,
            frame_count=count,
        )
        self.segments.append(segment)
        self._segment_start = self._frames
        return segment

    def finish(self) -> VideoStreamInfo:
        if self._container is None or self._stream is None:
            raise VideoError("no frames were added", where=str(self.path))
        if self._frames > self._segment_start:
            self.end_segment()
        try:
            with translated(self.path, "finish the video", hint=_ENCODER_HINT):
                self._mux(self._stream.encode(None))
                self._container.close()
            self._container = None
            self._partial.replace(self.path)
        except BaseException:
            self.abort()
            raise
        self.stream_info = probe(self.path)
        return self.stream_info

    def abort(self) -> None:
        if self._container is not None:
            with contextlib.suppress(Exception):
                self._container.close()
            self._container = None
        self._partial.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()

    def _checked(self, frame: np.ndarray) -> np.ndarray:
        frame = np.asarray(frame)
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise InvalidInput(
                f"a video frame must be uint8 (height, width, 3), got {frame.dtype} {frame.shape}",
                where=str(self.path),
                hint="convert float images in [0, 1] with (image * 255).round().astype(np.uint8)",
            )
        if self._shape is not None and frame.shape != self._shape:
            raise InvalidInput(
                f"frame {self._frames} has shape {frame.shape}, the earlier ones {self._shape}",
                where=str(self.path),
            )
        self._shape = frame.shape
        return np.ascontiguousarray(frame)

    def _checked_depth(self, frame: np.ndarray) -> np.ndarray:
        frame = np.asarray(frame)
        if frame.dtype not in (np.uint16, np.float32) or frame.ndim not in (2, 3):
            raise InvalidInput(
                "a depth frame must be uint16 millimetres or float32 metres, (height, width[, 1]); "
                f"got {frame.dtype} {frame.shape}",
                where=str(self.path),
            )
        if self._shape is not None and frame.shape != self._shape:
            raise InvalidInput(
                f"frame {self._frames} has shape {frame.shape}, the earlier ones {self._shape}",
                where=str(self.path),
            )
        self._shape = frame.shape
        return frame

    def _open(self, height: int, width: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # SVT-AV1 logs through its own channel, read from the environment when it starts.
        os.environ.setdefault("SVT_LOG", "1")
        quiet = _QUIET_OPTIONS.get(self.encoding.codec, {})
        options = {**quiet, **self.encoding.codec_options(self._threads)}
        for key, value in quiet.items():  # x265's lossless=1 (depth) joins its quiet log level
            if options[key] != value:
                options[key] = f"{options[key]}:{value}"
        with translated(self.path, f"start a {self.encoding.codec} video", hint=_ENCODER_HINT):
            container = av.open(
                str(self._partial), mode="w", format="mp4", options={"movflags": "faststart"}
            )
            try:
                stream = container.add_stream(
                    self.encoding.codec,
                    rate=self.fps,
                    options=options,
                )
                if not isinstance(stream, av.VideoStream):
                    raise InvalidInput(
                        f"{self.encoding.codec} is not a video codec", where="video.codec"
                    )
                stream.width = width
                stream.height = height
                stream.pix_fmt = self.encoding.pix_fmt
                stream.time_base = Fraction(1, self.fps)
            except BaseException:
                container.close()
                self._partial.unlink(missing_ok=True)
                raise
        self._container, self._stream = container, stream

    def _mux(self, packets: Sequence[av.Packet]) -> None:
        assert self._container is not None
        for packet in packets:
            self._repair_dts(packet)
            self._container.mux(packet)

    def _repair_dts(self, packet: av.Packet) -> None:
        """Give a packet a decode time the muxer accepts when the encoder left it unset.

        libx265 computes decode times from the first two frames' gap, so a one-frame video gets
        an uninitialised one (-1.3e16, or a value mp4 refuses as "not yet implemented").
        """
        if packet.pts is None:
            return
        lowest = packet.pts - _MAX_REORDER if self._last_dts is None else self._last_dts + 1
        if packet.dts is None or not lowest <= packet.dts <= packet.pts:
            packet.dts = packet.pts if self._last_dts is None else lowest
        self._last_dts = packet.dts


class PyAVVideoEncoder:
    """`VideoEncoder` on PyAV: write, join and probe mp4 files."""

    def __init__(self, threads: int | None = None) -> None:
        # None lets the encoder choose; recording with several cameras may want fewer each.
        self._threads = threads

    def begin(self, path: Path, fps: int, encoding: VideoEncoding) -> PyAVVideoWriter:
        return PyAVVideoWriter(path, fps, encoding, threads=self._threads)

    def concatenate(self, inputs: Sequence[Path], output: Path) -> list[VideoSegment]:
        return concatenate(inputs, output)

    def probe(self, path: Path) -> VideoStreamInfo:
        return probe(path)


def encode_frames(
    path: Path, frames: Sequence[np.ndarray] | np.ndarray, fps: int, encoding: VideoEncoding
) -> VideoStreamInfo:
    """Write one run of frames as a whole file: the common case of one episode, one file."""
    writer = PyAVVideoWriter(path, fps, encoding)
    with writer:
        for frame in frames:
            writer.add_frame(frame)
    assert writer.stream_info is not None
    return writer.stream_info
