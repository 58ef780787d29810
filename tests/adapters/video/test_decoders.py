"""Both decoders return the frames LeRobot 0.6.1 returned, and fail with `VideoError`s that help."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from rlctl.adapters.video import open_files
from rlctl.adapters.video.pyav_decoder import PyAVVideoDecoder
from rlctl.adapters.video.pyav_encoder import encode_frames
from rlctl.application.ports.video import VideoDecoder
from rlctl.domain.errors import VideoError
from rlctl.domain.video import VideoEncoding, VideoTimestampError, default_tolerance_s

FRONT = "observation.images.front"
TOLERANCE = default_tolerance_s(10)


def _torchcodec() -> VideoDecoder:
    from rlctl.adapters.video.torchcodec_decoder import TorchCodecVideoDecoder

    return TorchCodecVideoDecoder()


def _auto() -> VideoDecoder:
    from rlctl.adapters.video.auto import AutoVideoDecoder

    return AutoVideoDecoder()


# torchcodec imports torch, which takes seconds: those runs are marked slow.
BACKENDS = [
    pytest.param(PyAVVideoDecoder, id="pyav"),
    pytest.param(_torchcodec, id="torchcodec", marks=pytest.mark.slow),
    pytest.param(_auto, id="auto", marks=pytest.mark.slow),
]


def _reference_queries(sim_video: Path) -> list[tuple[int, list[float]]]:
    """For each reference item: the file timestamps LeRobot decoded for delta [-1, 0] frames."""
    reference = json.loads((sim_video.parent / "sim_video.reference.json").read_text())
    episodes = pq.read_table(sim_video / "meta/episodes/chunk-000/file-000.parquet").to_pydict()
    rows = pq.read_table(sim_video / "data/chunk-000/file-000.parquet").to_pydict()
    queries = []
    for item in reference["items"]:
        index = item["index"]
        episode = rows["episode_index"][index]
        first, end = episodes["dataset_from_index"][episode], episodes["dataset_to_index"][episode]
        offset = episodes[f"videos/{FRONT}/from_timestamp"][episode]
        rows_asked = [min(max(index + delta, first), end - 1) for delta in (-1, 0)]
        queries.append((index, [offset + rows["timestamp"][row] for row in rows_asked]))
    return queries


@pytest.mark.parametrize("make_decoder", BACKENDS)
def test_frames_match_lerobot_reference(
    make_decoder: Callable[[], VideoDecoder], sim_video: Path, front_mp4: Path
) -> None:
    reference = np.load(sim_video.parent / "sim_video.reference.npz")
    decoder = make_decoder()
    for index, timestamps in _reference_queries(sim_video):
        frames = decoder.decode(front_mp4, timestamps, TOLERANCE)
        assert frames.dtype == np.uint8
        assert frames.shape == (2, 48, 64, 3)
        as_lerobot = frames.transpose(0, 3, 1, 2).astype(np.float32) / 255
        difference = np.abs(as_lerobot - reference[f"{index}/{FRONT}"]).mean()
        assert difference <= 1 / 255, f"item {index}"
    decoder.close()


def test_answers_in_the_order_asked_and_repeats(front_mp4: Path) -> None:
    decoder = PyAVVideoDecoder()
    forward = decoder.decode(front_mp4, [0.3, 2.0, 7.4], TOLERANCE)
    shuffled = decoder.decode(front_mp4, [7.4, 0.3, 2.0, 0.3], TOLERANCE)
    np.testing.assert_array_equal(shuffled, forward[[2, 0, 1, 0]])


def test_reading_on_after_a_read_equals_a_fresh_read(front_mp4: Path) -> None:
    warm = PyAVVideoDecoder()
    warm.decode(front_mp4, [1.0], TOLERANCE)
    timestamps = [1.1, 1.2, 1.5, 0.2]  # forward a little, forward past keyframes, then back
    expected = [PyAVVideoDecoder().decode(front_mp4, [t], TOLERANCE)[0] for t in timestamps]
    for t, frame in zip(timestamps, expected, strict=True):
        np.testing.assert_array_equal(warm.decode(front_mp4, [t], TOLERANCE)[0], frame)


def test_picks_the_nearest_frame(front_mp4: Path) -> None:
    decoder = PyAVVideoDecoder()
    exact = decoder.decode(front_mp4, [0.3, 0.4], TOLERANCE)
    near = decoder.decode(front_mp4, [0.34, 0.36], TOLERANCE)
    np.testing.assert_array_equal(near, exact)


@pytest.mark.parametrize("make_decoder", BACKENDS[:2])
def test_timestamp_beyond_tolerance_names_file_query_and_nearest(
    make_decoder: Callable[[], VideoDecoder], front_mp4: Path
) -> None:
    with pytest.raises(VideoTimestampError) as caught:
        make_decoder().decode(front_mp4, [0.0, 9.0], TOLERANCE)
    assert caught.value.where == str(front_mp4)
    assert "9.0000" in caught.value.message
    assert "7.4000" in caught.value.message  # the last frame, the nearest one
    assert isinstance(caught.value, VideoError)


def test_tolerance_is_strict_as_in_lerobot(front_mp4: Path) -> None:
    decoder = PyAVVideoDecoder()
    distance_to_frame = 0.35 - 0.3  # exactly what the decoder computes for the frame at 0.3 s
    decoder.decode(front_mp4, [0.349], distance_to_frame)
    with pytest.raises(VideoTimestampError):
        decoder.decode(front_mp4, [0.35], distance_to_frame)


@pytest.mark.parametrize("make_decoder", BACKENDS[:2])
def test_missing_file_is_a_video_error(
    make_decoder: Callable[[], VideoDecoder], tmp_path: Path
) -> None:
    missing = tmp_path / "videos" / "file-000.mp4"
    with pytest.raises(VideoError, match="not found") as caught:
        make_decoder().decode(missing, [0.0], TOLERANCE)
    assert caught.value.where == str(missing)


@pytest.mark.parametrize("make_decoder", BACKENDS[:2])
@pytest.mark.parametrize("keep_bytes", [200, 0.5])
def test_truncated_file_is_a_video_error(
    make_decoder: Callable[[], VideoDecoder],
    front_mp4: Path,
    tmp_path: Path,
    keep_bytes: float,
) -> None:
    data = front_mp4.read_bytes()
    truncated = tmp_path / "file-000.mp4"
    truncated.write_bytes(data[: int(keep_bytes if keep_bytes >= 1 else len(data) * keep_bytes)])
    with pytest.raises(VideoError) as caught:
        make_decoder().decode(truncated, [0.0, 3.5, 7.4], TOLERANCE)
    assert caught.value.where == str(truncated)


def test_not_a_video_is_a_video_error(tmp_path: Path) -> None:
    bogus = tmp_path / "file-000.mp4"
    bogus.write_text("this is not an mp4")
    with pytest.raises(VideoError, match="cannot open video") as caught:
        PyAVVideoDecoder().decode(bogus, [0.0], TOLERANCE)
    assert caught.value.hint


def test_a_file_replaced_after_an_error_is_read_afresh(front_mp4: Path, tmp_path: Path) -> None:
    video = tmp_path / "file-000.mp4"
    video.write_bytes(front_mp4.read_bytes()[:200])
    decoder = PyAVVideoDecoder()
    with pytest.raises(VideoError):
        decoder.decode(video, [0.0], TOLERANCE)
    shutil.copyfile(front_mp4, video)
    assert decoder.decode(video, [7.4], TOLERANCE).shape == (1, 48, 64, 3)


def test_files_stay_open_up_to_the_limit(front_mp4: Path, tmp_path: Path) -> None:
    copies = [tmp_path / f"file-{i:03d}.mp4" for i in range(3)]
    for copy in copies:
        shutil.copyfile(front_mp4, copy)
    decoder = PyAVVideoDecoder(max_open_files=2)
    for copy in copies:
        decoder.decode(copy, [1.0], TOLERANCE)
    assert len(decoder._files) == 2
    decoder.close()
    assert len(decoder._files) == 0


def test_a_forked_process_opens_its_own_files(
    front_mp4: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoder = PyAVVideoDecoder()
    decoder.decode(front_mp4, [1.0], TOLERANCE)
    inherited = decoder._files.get(front_mp4)
    monkeypatch.setattr(open_files.os, "getpid", lambda: -1)
    assert decoder._files.get(front_mp4) is not inherited


def _decode_in_child(decoder: PyAVVideoDecoder, path: Path, queue: multiprocessing.Queue) -> None:
    queue.put(decoder.decode(path, [2.0, 7.4], TOLERANCE))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_decoding_in_a_forked_child_agrees_with_the_parent(front_mp4: Path) -> None:
    decoder = PyAVVideoDecoder()
    expected = decoder.decode(front_mp4, [2.0, 7.4], TOLERANCE)
    decoder.decode(front_mp4, [5.0], TOLERANCE)  # leave the parent's decoder mid-file
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_decode_in_child, args=(decoder, front_mp4, queue))
    child.start()
    from_child = queue.get(timeout=30)
    child.join(timeout=30)
    np.testing.assert_array_equal(from_child, expected)
    np.testing.assert_array_equal(decoder.decode(front_mp4, [2.0, 7.4], TOLERANCE), expected)


@pytest.mark.parametrize(
    "encoding",
    [
        pytest.param(VideoEncoding(), id="av1-gop2"),
        pytest.param(VideoEncoding(codec="h264", g=None), id="h264-long-gop-bframes"),
    ],
)
def test_random_reads_equal_a_full_sequential_decode(
    encoding: VideoEncoding, tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    path = tmp_path / "file-000.mp4"
    encode_frames(path, make_frames(40), 10, encoding)
    with av.open(str(path)) as container:
        everything = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    rng = np.random.default_rng(0)
    decoder = PyAVVideoDecoder()
    for _ in range(60):
        indices = rng.integers(0, 40, size=int(rng.integers(1, 4)))
        jitter = rng.uniform(-0.04, 0.04, size=len(indices))
        frames = decoder.decode(path, list(indices / 10 + jitter), TOLERANCE)
        np.testing.assert_array_equal(frames, everything[indices])
