"""The writer's small parts: PNG encoding, image statistics sampling, atomic replacement."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image

from rlctl.adapters.storage.lerobot_v3.atomic_files import StagedReplace, replacing
from rlctl.adapters.storage.lerobot_v3.image_sampling import (
    FrameSampler,
    downsample_step,
    sample_indices,
    uint8_channel_stats,
)
from rlctl.adapters.storage.lerobot_v3.png import encode_png
from rlctl.domain.statistics import RunningStats


@settings(max_examples=30, deadline=None)
@given(
    image=st.integers(1, 4).flatmap(
        lambda c: arrays(np.uint8, st.tuples(st.integers(1, 9), st.integers(1, 9), st.just(c)))
    )
)
def test_png_decodes_to_the_same_pixels(image: np.ndarray) -> None:
    decoded = np.asarray(Image.open(io.BytesIO(encode_png(image))))
    np.testing.assert_array_equal(decoded.reshape(image.shape), image)


def test_png_refuses_what_it_cannot_hold() -> None:
    with pytest.raises(ValueError, match="uint8"):
        encode_png(np.zeros((2, 2, 3), np.float32))
    with pytest.raises(ValueError, match="channels"):
        encode_png(np.zeros((2, 2, 5), np.uint8))


@pytest.mark.parametrize("length", [1, 2, 50, 99, 100, 101, 463, 1000, 5000])
def test_sample_indices_are_lerobots(length: int) -> None:
    # LeRobot 0.6.1 compute_stats.estimate_num_samples / sample_indices, restated.
    count = max(min(100, length), min(int(length**0.75), 10_000))
    expected = np.round(np.linspace(0, length - 1, count)).astype(int)
    np.testing.assert_array_equal(sample_indices(length), expected)


def test_downsampling_follows_lerobot() -> None:
    assert downsample_step(240, 299) == 1
    assert downsample_step(240, 320) == 2  # int(320 / 150)
    assert downsample_step(480, 640) == 4
    assert downsample_step(640, 480) == 4


def test_sampler_keeps_every_frame_while_short_then_thins() -> None:
    sampler = FrameSampler(capacity=8)
    frames = [np.full((2, 2, 1), i, np.uint8) for i in range(20)]
    for frame in frames[:7]:
        sampler.add(frame)
    assert sampler.sampled()[:, 0, 0, 0].tolist() == list(range(7))
    for frame in frames[7:]:
        sampler.add(frame)
    picked = sampler.sampled()[:, 0, 0, 0]
    assert len(picked) == 20 and picked[0] == 0
    # Kept every 4th frame by now: each pick is the nearest kept one (at most 3 frames off).
    assert np.abs(picked.astype(int) - np.arange(20)).max() <= 3


@settings(max_examples=20, deadline=None)
@given(
    frames=arrays(
        np.uint8,
        st.tuples(st.integers(1, 5), st.integers(1, 6), st.integers(1, 6), st.sampled_from([1, 3])),
    )
)
def test_uint8_stats_equal_running_stats(frames: np.ndarray) -> None:
    running = RunningStats.per_channel(channel_axis=-1, divide_by=255.0)
    running.update(frames)
    expected = running.result().to_json()
    for key, value in uint8_channel_stats(frames).to_json().items():
        np.testing.assert_allclose(value, expected[key], rtol=1e-12, atol=1e-12, err_msg=key)


def test_replacing_leaves_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "file.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target) as temp:
        temp.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.json"]


def test_staged_files_appear_together_on_publish(tmp_path: Path) -> None:
    staged = StagedReplace(durable=False)
    staged.stage_json(tmp_path / "a.json", {"a": 1})
    staged.stage(tmp_path / "sub" / "b.txt", lambda temp: temp.write_text("b"))
    assert not (tmp_path / "a.json").exists()
    staged.publish()
    assert (tmp_path / "a.json").read_text() == '{\n    "a": 1\n}'
    assert (tmp_path / "sub" / "b.txt").read_text() == "b"
    staged.stage_json(tmp_path / "c.json", {})
    staged.discard()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.json", "b.txt", "sub"]
