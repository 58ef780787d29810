"""What a video file holds, read from its container headers with PyAV."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av

from rlctl.adapters.video.errors import CORRUPT_HINT, ensure_file, translated
from rlctl.domain.errors import VideoError
from rlctl.domain.video import VideoStreamInfo


def probe(path: Path) -> VideoStreamInfo:
    """Size, fps, codec, pixel format, frame count and duration of the first video stream."""
    path = Path(path)
    ensure_file(path)
    with translated(path, "read the video's headers"), av.open(str(path), mode="r") as container:
        stream = _video_stream(container, path)
        return VideoStreamInfo(
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            # r_frame_rate, as LeRobot records `video.fps`.
            fps=float(stream.base_rate or stream.average_rate or stream.guessed_rate or 0),
            codec=stream.codec_context.codec.canonical_name,
            pix_fmt=stream.codec_context.pix_fmt or "",
            frame_count=stream.frames or _count_packets(container, stream),
            duration_s=float(stream_duration(container, stream)),
            has_audio=bool(container.streams.audio),
        )


def stream_duration(container: av.container.InputContainer, stream: av.VideoStream) -> Fraction:
    """Exact duration in seconds: the stream's when the container states it, else the file's."""
    if stream.duration is not None and stream.time_base is not None:
        return stream.duration * stream.time_base
    if container.duration is not None:
        return Fraction(container.duration, av.time_base)
    raise VideoError("the video states no duration", where=str(container.name))


def _video_stream(container: av.container.InputContainer, path: Path) -> av.VideoStream:
    if not container.streams.video:
        raise VideoError("the file has no video stream", where=str(path), hint=CORRUPT_HINT)
    return container.streams.video[0]


def _count_packets(container: av.container.InputContainer, stream: av.VideoStream) -> int:
    # Some muxers leave the frame count out of the header; counting packets reads no pixels.
    count = sum(1 for packet in container.demux(stream) if packet.size > 0)
    container.seek(0)
    return count
