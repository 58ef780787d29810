"""Encoding, joining and probing mp4 files the way LeRobot lays them out."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pytest

from rlctl.adapters.video.pyav_decoder import PyAVVideoDecoder
from rlctl.adapters.video.pyav_encoder import PyAVVideoEncoder, encode_frames
from rlctl.domain.errors import InvalidInput, VideoError
from rlctl.domain.video import (
    VideoEncoding,
    VideoSegment,
    default_tolerance_s,
    depth_video_encoding,
    video_feature_info,
)

FPS = 10
TOLERANCE = default_tolerance_s(FPS)
# Mean absolute error, in 8-bit levels, that CRF 30 keeps smooth synthetic frames within.
CODEC_MEAN_ERROR = 8.0


def _frame_times(path: Path) -> list[float]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return [float(frame.pts * stream.time_base) for frame in container.decode(stream)]


@pytest.mark.parametrize("codec", ["libsvtav1", "h264"])
def test_round_trip_with_episodes_back_to_back(
    codec: str, tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    first, second = make_frames(6), make_frames(9, phase=2.0)
    path = tmp_path / "videos" / "cam" / "chunk-000" / "file-000.mp4"
    writer = PyAVVideoEncoder().begin(path, FPS, VideoEncoding(codec=codec))
    for frame in first:
        writer.add_frame(frame)
    assert writer.end_segment() == VideoSegment(0.0, 0.6, 6)
    for frame in second:
        writer.add_frame(frame)
    assert not path.exists()  # nothing at the dataset's path until the file is whole
    info = writer.finish()

    assert writer.segments == [VideoSegment(0.0, 0.6, 6), VideoSegment(0.6, 1.5, 9)]
    assert (info.width, info.height, info.fps, info.frame_count) == (64, 48, 10.0, 15)
    assert info.codec == VideoEncoding(codec=codec).stream_codec
    assert info.duration_s == pytest.approx(1.5)
    assert _frame_times(path) == pytest.approx([i / FPS for i in range(15)])

    decoded = PyAVVideoDecoder().decode(path, [0.6 + i / FPS for i in range(9)], TOLERANCE)
    assert np.abs(decoded.astype(float) - second).mean() < CODEC_MEAN_ERROR


def test_hidden_partial_files_never_outlive_the_writer(
    tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    path = tmp_path / "file-000.mp4"
    with pytest.raises(RuntimeError), PyAVVideoEncoder().begin(path, FPS, VideoEncoding()) as w:
        w.add_frame(make_frames(1)[0])
        raise RuntimeError("recording interrupted")
    assert list(tmp_path.iterdir()) == []


def test_frames_must_be_uint8_rgb_of_one_size(
    tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    writer = PyAVVideoEncoder().begin(tmp_path / "file-000.mp4", FPS, VideoEncoding())
    with pytest.raises(InvalidInput, match="uint8"):
        writer.add_frame(make_frames(1)[0].astype(np.float32) / 255)
    writer.add_frame(make_frames(1)[0])
    with pytest.raises(InvalidInput, match="shape"):
        writer.add_frame(make_frames(1, height=32)[0])
    writer.abort()
    assert list(tmp_path.iterdir()) == []


def test_finishing_without_frames_is_an_error(tmp_path: Path) -> None:
    writer = PyAVVideoEncoder().begin(tmp_path / "file-000.mp4", FPS, VideoEncoding())
    with pytest.raises(VideoError, match="no frames"):
        writer.finish()


def test_odd_sizes_that_the_codec_refuses_are_video_errors(
    tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    path = tmp_path / "file-000.mp4"
    with pytest.raises(VideoError) as caught:
        encode_frames(path, make_frames(2, height=47, width=63), FPS, VideoEncoding(codec="h264"))
    assert caught.value.where == str(path)
    assert not path.exists()


def test_concatenation_copies_frames_and_shifts_time(
    tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    encoding = VideoEncoding()
    first = tmp_path / "episode-0.mp4"
    second = tmp_path / "episode-1.mp4"
    encode_frames(first, make_frames(4), FPS, encoding)
    encode_frames(second, make_frames(5, phase=1.0), FPS, encoding)
    joined = tmp_path / "file-000.mp4"

    segments = PyAVVideoEncoder().concatenate([first, second], joined)

    assert segments == [VideoSegment(0.0, 0.4, 4), VideoSegment(0.4, 0.9, 5)]
    assert _frame_times(joined) == pytest.approx([i / FPS for i in range(9)])
    decoder = PyAVVideoDecoder()
    originals = np.concatenate(
        [
            decoder.decode(first, [i / FPS for i in range(4)], TOLERANCE),
            decoder.decode(second, [i / FPS for i in range(5)], TOLERANCE),
        ]
    )
    np.testing.assert_array_equal(
        decoder.decode(joined, [i / FPS for i in range(9)], TOLERANCE), originals
    )


def test_appending_to_an_existing_file(
    tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    existing = tmp_path / "file-000.mp4"
    episode = tmp_path / "episode-2.mp4"
    encode_frames(existing, make_frames(3), FPS, VideoEncoding())
    encode_frames(episode, make_frames(2), FPS, VideoEncoding())

    segments = PyAVVideoEncoder().concatenate([existing, episode], existing)

    assert segments[-1] == VideoSegment(0.3, 0.5, 2)
    assert PyAVVideoEncoder().probe(existing).frame_count == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episode-2.mp4", "file-000.mp4"]


def test_joining_different_videos_is_refused(
    tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    small = tmp_path / "small.mp4"
    large = tmp_path / "large.mp4"
    encode_frames(small, make_frames(2), FPS, VideoEncoding())
    encode_frames(large, make_frames(2, height=64), FPS, VideoEncoding())
    with pytest.raises(VideoError, match="height") as caught:
        PyAVVideoEncoder().concatenate([small, large], tmp_path / "file-000.mp4")
    assert caught.value.where == str(large)
    assert not (tmp_path / "file-000.mp4").exists()


def test_probe_matches_what_lerobot_wrote_in_info_json(sim_video: Path, front_mp4: Path) -> None:
    info = json.loads((sim_video / "meta" / "info.json").read_text())
    written = info["features"]["observation.images.front"]["info"]

    probed = PyAVVideoEncoder().probe(front_mp4)

    assert (probed.frame_count, probed.duration_s) == (75, 7.5)
    assert video_feature_info(probed, VideoEncoding()) == written
    assert VideoEncoding.from_info(written) == VideoEncoding()


def test_probe_of_a_missing_file_is_a_video_error(tmp_path: Path) -> None:
    with pytest.raises(VideoError, match="not found"):
        PyAVVideoEncoder().probe(tmp_path / "file-000.mp4")


def test_one_frame_hevc_videos_get_a_valid_decode_time(tmp_path: Path) -> None:
    # libx265 leaves a one-frame video's decode time uninitialised; mp4 then refuses about a
    # third of them ("not yet implemented") and stores an absurd edit list in the rest.
    depth = np.full((16, 32), 1500, np.uint16)
    for attempt in range(10):
        path = tmp_path / f"one-{attempt}.mp4"
        writer = PyAVVideoEncoder().begin(path, fps=FPS, encoding=depth_video_encoding())
        writer.add_frame(depth)
        writer.finish()
        with av.open(str(path)) as container:
            packets = [p for p in container.demux(video=0) if p.size]
        assert [(p.pts, p.dts) for p in packets] == [(0, 0)]
