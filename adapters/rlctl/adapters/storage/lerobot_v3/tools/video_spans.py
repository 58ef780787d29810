"""Copying spans of mp4 files into a new file without re-encoding (PyAV stream copy).

An episode inside a LeRobot video file is a span `[from_timestamp, to_timestamp)`. Both LeRobot
and rlctl encode each episode on its own and join the results, so every span starts on a
keyframe: its packets can be copied as they are, their timestamps shifted to where the span goes
in the new file. A span that does not start on a keyframe (a file re-encoded whole by another
tool) cannot be cut there; `reencode_span` decodes and encodes it instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path

import attrs
import av
import numpy as np

from rlctl.adapters.storage.episode_source import VideoSpan
from rlctl.adapters.video.errors import ensure_file, translated
from rlctl.adapters.video.pyav_encoder import encode_frames
from rlctl.adapters.video.pyav_probe import stream_duration
from rlctl.domain.errors import CorruptDataset, NotSupported, VideoError
from rlctl.domain.video import VideoEncoding


@attrs.frozen
class StreamParams:
    """What packets need in common to share one output stream."""

    codec: str
    width: int
    height: int
    pix_fmt: str
    extradata: bytes


@attrs.frozen
class VideoFacts:
    params: StreamParams
    size_bytes: int
    duration_s: float


def video_facts(path: Path) -> VideoFacts:
    ensure_file(path)
    with translated(path, "read the video's headers"), av.open(str(path)) as container:
        stream = _video_stream(container, path)
        context = stream.codec_context
        params = StreamParams(
            codec=context.codec.canonical_name,
            width=context.width,
            height=context.height,
            pix_fmt=context.pix_fmt or "",
            extradata=bytes(context.extradata or b""),
        )
        duration = float(stream_duration(container, stream))
    return VideoFacts(params, path.stat().st_size, duration)


def _video_stream(container: av.container.InputContainer, path: Path) -> av.VideoStream:
    if not container.streams.video:
        raise VideoError("the file has no video stream", where=str(path))
    return container.streams.video[0]


def _seek_before(
    container: av.container.InputContainer, stream: av.VideoStream, seconds: float
) -> None:
    assert stream.time_base is not None
    target = max(0, int(Fraction(seconds) / stream.time_base))
    container.seek(target, stream=stream, backward=True, any_frame=False)


def _window(span: VideoSpan, fps: int) -> tuple[float, float]:
    # Frames sit at from_timestamp + k / fps; half a frame of slack absorbs rounding on both ends.
    half = 0.5 / fps
    return span.from_timestamp - half, span.to_timestamp - half


def starts_on_keyframe(span: VideoSpan, fps: int) -> bool:
    """Whether the span's first packet is a keyframe, so the span can be copied as it is."""
    low, high = _window(span, fps)
    with translated(span.path, "read the video"), av.open(str(span.path)) as container:
        stream = _video_stream(container, span.path)
        _seek_before(container, stream, low)
        assert stream.time_base is not None
        for packet in container.demux(stream):
            if packet.dts is None or packet.pts is None:
                continue
            seconds = float(packet.pts * stream.time_base)
            if seconds >= low:
                return bool(packet.is_keyframe) and seconds < high
    return False


@attrs.frozen
class Piece:
    """A span of a source file and where its first frame goes in the output file (seconds)."""

    span: VideoSpan
    start: float
    frames: int


def copy_spans(pieces: Sequence[Piece], output: Path, fps: int) -> None:
    """Write `pieces` one after the other into `output` by copying their packets."""
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.stem}.partial-{os.getpid()}.mp4")
    try:
        with (
            translated(output, "join video spans"),
            av.open(str(partial), mode="w", format="mp4", options={"movflags": "faststart"}) as out,
        ):
            writer = _SpanWriter(out, fps)
            for piece in pieces:
                writer.copy(piece)
            writer.close()
        partial.replace(output)
    finally:
        partial.unlink(missing_ok=True)


class _SpanWriter:
    """Keeps the current source open while consecutive pieces come from it."""

    def __init__(self, out: av.container.OutputContainer, fps: int) -> None:
        self._out = out
        self._fps = fps
        self._stream: av.VideoStream | None = None
        self._source: av.container.InputContainer | None = None
        self._source_path: Path | None = None

    def _open(self, path: Path) -> av.container.InputContainer:
        if self._source is None or self._source_path != path:
            self.close()
            ensure_file(path)
            self._source, self._source_path = av.open(str(path)), path
        return self._source

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source, self._source_path = None, None

    def copy(self, piece: Piece) -> None:
        span = piece.span
        with translated(span.path, "copy video frames"):
            source = self._open(span.path)
            stream = _video_stream(source, span.path)
            if self._stream is None:
                self._stream = self._out.add_stream_from_template(stream, opaque=True)
                self._stream.time_base = stream.time_base
            copied = self._copy_packets(source, stream, piece)
        if copied != piece.frames:
            raise CorruptDataset(
                f"the span [{span.from_timestamp:.4f}, {span.to_timestamp:.4f}) s holds {copied} "
                f"frames but its episode has {piece.frames} rows",
                where=str(span.path),
                hint="the video and meta/episodes disagree; run `rlctl dataset check` on it",
            )

    def _copy_packets(
        self, source: av.container.InputContainer, stream: av.VideoStream, piece: Piece
    ) -> int:
        time_base = stream.time_base
        assert time_base is not None and self._stream is not None
        low, high = _window(piece.span, self._fps)
        _seek_before(source, stream, low)
        shift: int | None = None
        copied = 0
        for packet in source.demux(stream):
            if packet.dts is None or packet.pts is None:  # end-of-stream markers
                continue
            seconds = float(packet.pts * time_base)
            if seconds < low:
                continue
            if seconds >= high:
                break
            if shift is None:
                if not packet.is_keyframe:
                    raise VideoError(
                        "the episode's span does not start on a keyframe",
                        where=str(piece.span.path),
                        hint="its frames have to be re-encoded",
                    )
                # The span's first frame lands exactly at `start`, wherever it was before.
                shift = round(Fraction(piece.start) / time_base) - packet.pts
            packet.pts += shift
            packet.dts += shift
            packet.stream = self._stream
            self._out.mux(packet)
            copied += 1
        return copied


def iter_span_frames(span: VideoSpan, fps: int) -> Iterator[np.ndarray]:
    """The span's frames one at a time, uint8 (H, W, 3): an episode never sits in memory whole."""
    low, high = _window(span, fps)
    count = 0
    with translated(span.path, "decode the video"), av.open(str(span.path)) as container:
        stream = _video_stream(container, span.path)
        _seek_before(container, stream, low)
        assert stream.time_base is not None
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            seconds = float(frame.pts * stream.time_base)
            if seconds < low:
                continue
            if seconds >= high:
                break
            count += 1
            yield frame.to_ndarray(format="rgb24")
    if not count:
        raise CorruptDataset("the episode's span holds no frame", where=str(span.path))


def decode_span(span: VideoSpan, fps: int) -> np.ndarray:
    """Every frame of the span, uint8 (N, H, W, 3)."""
    return np.stack(list(iter_span_frames(span, fps)))


def reencode_span(span: VideoSpan, fps: int, encoding: VideoEncoding, output: Path) -> VideoSpan:
    """The span's frames encoded on their own into `output`, which then holds the whole span."""
    if encoding.depth is not None:
        raise NotSupported(
            f"the depth video span [{span.from_timestamp:.4f}, {span.to_timestamp:.4f}) s does "
            "not start on a keyframe, and rlctl re-encodes only RGB spans",
            where=str(span.path),
            hint="copy whole episodes of this dataset with LeRobot's tools, or re-record the "
            "depth camera so each episode starts on a keyframe (as LeRobot and rlctl write them)",
        )
    frames = decode_span(span, fps)
    info = encode_frames(output, frames, fps, encoding)
    return VideoSpan(output, 0.0, info.duration_s)
