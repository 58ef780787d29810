"""Join mp4 files end to end without re-encoding, as LeRobot packs episodes into file-YYY.mp4.

Packets are copied with their timestamps shifted by the length of the files before them, so
file k's first frame plays at the sum of the earlier durations: the `from_timestamp` LeRobot
stores for that episode.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av

from rlctl.adapters.video.errors import ensure_file, translated
from rlctl.adapters.video.pyav_probe import probe, stream_duration
from rlctl.domain.errors import InvalidInput, VideoError
from rlctl.domain.video import VideoSegment, VideoStreamInfo


def concatenate(inputs: Sequence[Path], output: Path) -> list[VideoSegment]:
    """Write `inputs` one after the other into `output` (which may be one of them)."""
    paths = [Path(p) for p in inputs]
    if not paths:
        raise InvalidInput("no video files to concatenate", where=str(output))
    for path in paths:
        ensure_file(path)
    infos = _check_compatible(paths)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_path(output)
    try:
        with translated(output, "concatenate videos"):
            segments = _remux(paths, [info.frame_count for info in infos], partial)
        partial.replace(output)
    finally:
        partial.unlink(missing_ok=True)
    return segments


def partial_path(path: Path) -> Path:
    """Where a file is written before it is complete: hidden, next to it, on the same disk."""
    return path.with_name(f".{path.stem}.partial-{os.getpid()}.mp4")


def _check_compatible(paths: list[Path]) -> list[VideoStreamInfo]:
    infos = [probe(path) for path in paths]
    for path, other in zip(paths[1:], infos[1:]):
        differences = _differences(infos[0], other)
        if differences:
            raise VideoError(
                f"cannot join videos with different {', '.join(differences)} "
                f"(first file: {paths[0]})",
                where=str(path),
                hint="re-encode the files with the same settings before joining them",
            )
    return infos


def _differences(a: VideoStreamInfo, b: VideoStreamInfo) -> list[str]:
    fields = ("codec", "width", "height", "fps", "pix_fmt")
    return [
        f"{name} ({getattr(a, name)} vs {getattr(b, name)})"
        for name in fields
        if getattr(a, name) != getattr(b, name)
    ]


def _remux(paths: list[Path], frame_counts: list[int], destination: Path) -> list[VideoSegment]:
    segments: list[VideoSegment] = []
    start = Fraction(0)
    with av.open(
        str(destination), mode="w", format="mp4", options={"movflags": "faststart"}
    ) as output:
        out_stream: av.VideoStream | None = None
        for path, frame_count in zip(paths, frame_counts):
            with av.open(str(path), mode="r") as source:
                stream = source.streams.video[0]
                if out_stream is None:
                    out_stream = output.add_stream_from_template(stream, opaque=True)
                    out_stream.time_base = stream.time_base
                duration = stream_duration(source, stream)
                _copy_packets(source, stream, output, out_stream, start)
                segments.append(VideoSegment(float(start), float(start + duration), frame_count))
                start += duration
    return segments


def _copy_packets(
    source: av.container.InputContainer,
    stream: av.VideoStream,
    output: av.container.OutputContainer,
    out_stream: av.VideoStream,
    start: Fraction,
) -> None:
    time_base = stream.time_base
    assert time_base is not None
    # Shift so this file's first frame lands at `start`, whatever its own first timestamp was.
    shift = round(start / time_base) - (stream.start_time or 0)
    for packet in source.demux(stream):
        if packet.dts is None:  # the demuxer's end-of-stream marker
            continue
        packet.pts = None if packet.pts is None else packet.pts + shift
        packet.dts += shift
        packet.stream = out_stream
        output.mux(packet)
