"""Depth cameras through rlctl's writer and reader: recorded as LeRobot records them (12-bit codes
in gray12le HEVC, raw TIFFs), read back as LeRobot returns them (float32 (1, H, W) millimetres),
with their statistics in the frames' unit; bad depth frames refused with a clear message."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.features import FeatureSpec


def load_support():
    path = Path(__file__).with_name("depth_support.py")
    spec = importlib.util.spec_from_file_location("depth_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ds = load_support()
EPISODES = ds.ODD_EPISODES
DELTAS = {ds.DEPTH_VIDEO: [-1 / ds.FPS, 0.0, 1 / ds.FPS], ds.DEPTH_IMAGE: [0.0, 1 / ds.FPS]}


def quantum_mm(depth_mm: np.ndarray) -> np.ndarray:
    """Largest error of the default log quantizer at each depth, plus rounding to whole mm."""
    ratio = np.exp(np.log((10.0 + 3.5) / (0.01 + 3.5)) / 4095) - 1
    return (np.clip(depth_mm, 10, 10_000) + 3500) * ratio / 2 + 0.51


def window(ep: int, t: int, offsets: list[int]) -> list[int]:
    last = len(EPISODES[ep]) - 1
    return [min(max(t + d, 0), last) for d in offsets]


@pytest.mark.parametrize("unit", ["mm", "m"])
def test_depth_cameras_read_back_as_lerobot_returns_them(tmp_path: Path, unit: str) -> None:
    root = tmp_path / "ds"
    ds.write(root, unit, episodes=EPISODES)
    recorded = ds.frames(unit, episodes=EPISODES)
    reader = LeRobotDatasetReader(root, delta_timestamps=DELTAS, video_backend="pyav")
    position = 0
    for ep, episode in enumerate(EPISODES):
        for t in range(len(episode)):
            item = reader[position]
            video, image = item[ds.DEPTH_VIDEO], item[ds.DEPTH_IMAGE]
            assert video.dtype == torch.float32 and video.shape == (3, 1, ds.HEIGHT, ds.WIDTH)
            assert image.dtype == torch.float32 and image.shape == (2, 1, ds.HEIGHT, ds.WIDTH)
            for k, frame_t in enumerate(window(ep, t, [-1, 0, 1])):
                raw = recorded[ep][frame_t][ds.DEPTH_VIDEO][..., 0].astype(np.float64)
                mm = np.clip(raw * (1000 if unit == "m" else 1), 10, 10_000)
                error = np.abs(video[k, 0].numpy() - mm)
                assert np.all(error <= quantum_mm(mm)), (ep, t, k, error.max())
            for k, frame_t in enumerate(window(ep, t, [0, 1])):
                raw = recorded[ep][frame_t][ds.DEPTH_IMAGE][..., 0]
                # The image is stored raw; metres come back as LeRobot scales them, in float32.
                expected = raw.astype(np.float32) * (np.float32(1000) if unit == "m" else 1)
                np.testing.assert_array_equal(image[k, 0].numpy(), expected)
            assert item[f"{ds.DEPTH_VIDEO}_is_pad"].tolist() == [
                t == 0,
                False,
                t == len(episode) - 1,
            ]
            position += 1

    info = json.loads((root / "meta/info.json").read_text())["features"]
    depth_info = info[ds.DEPTH_VIDEO]["info"]
    assert list(depth_info)[:2] == ["is_depth_map", "depth_unit"]
    assert depth_info["depth_unit"] == unit
    assert (depth_info["video.codec"], depth_info["video.pix_fmt"]) == ("hevc", "gray12le")
    assert depth_info["video.extra_options"] == {"x265-params": "lossless=1"}
    assert (depth_info["video.depth_min"], depth_info["video.use_log"]) == (0.01, True)
    assert info[ds.DEPTH_IMAGE]["info"] == {"is_depth_map": True, "depth_unit": unit}
    assert info[ds.RGB]["info"]["video.codec"] == "av1"
    assert info[ds.RGB]["info"]["is_depth_map"] is False

    # stats.json keeps the frames' unit, unscaled; the reader gives them in millimetres.
    scale = 1000.0 if unit == "m" else 1.0
    stored = json.loads((root / "meta/stats.json").read_text())
    for key in (ds.DEPTH_VIDEO, ds.DEPTH_IMAGE):
        assert np.shape(stored[key]["mean"]) == (1, 1, 1)
        assert stored[key]["count"] == [sum(len(e) for e in EPISODES)]
        assert stored[key]["min"] == [[[0.0]]]
        np.testing.assert_allclose(stored[key]["max"], [[[12_000.0 / scale]]], rtol=1e-7)
        read = reader.meta.stats[key]
        np.testing.assert_allclose(read["max"], np.asarray(stored[key]["max"]) * scale)
        np.testing.assert_array_equal(read["count"], stored[key]["count"])


def test_depth_in_metres_and_transforms_left_to_rgb(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    ds.write(root, "mm", episodes=EPISODES)
    reader = LeRobotDatasetReader(
        root, depth_output_unit="m", image_transforms=lambda image: image * 0
    )
    item = reader[5]
    assert torch.count_nonzero(item[ds.RGB]) == 0  # transformed
    depth = item[ds.DEPTH_VIDEO].numpy()
    expected = np.clip(ds.depth_mm(1, 1), 10, 10_000) / 1000
    assert np.all(np.abs(depth[0] - expected) <= quantum_mm(expected * 1000) / 1000)
    np.testing.assert_allclose(item[ds.DEPTH_IMAGE][0].numpy(), np.rint(ds.depth_mm(1, 1)) / 1000)
    assert float(reader.meta.stats[ds.DEPTH_VIDEO]["max"].max()) == 12.0
    with pytest.raises(InvalidInput, match="'m' or 'mm'"):
        LeRobotDatasetReader(root, depth_output_unit="cm")


@pytest.mark.slow
def test_encoder_processes_write_the_same_depth_codes(tmp_path: Path) -> None:
    ds.write(tmp_path / "threads", "m", rgb=False, episodes=EPISODES)
    ds.write(tmp_path / "processes", "m", rgb=False, subprocess=True, episodes=EPISODES)
    a = LeRobotDatasetReader(tmp_path / "threads", depth_output_unit="m")
    b = LeRobotDatasetReader(tmp_path / "processes", depth_output_unit="m")
    for i in range(len(a)):
        assert torch.equal(a[i][ds.DEPTH_VIDEO], b[i][ds.DEPTH_VIDEO])
    stats = [json.loads((r / "meta/stats.json").read_text()) for r in (a.root, b.root)]
    assert stats[0][ds.DEPTH_VIDEO] == stats[1][ds.DEPTH_VIDEO]


def test_resume_keeps_each_cameras_encoding_and_the_depth_unit(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    ds.write(root, "mm", episodes=EPISODES[:1])
    writer = LeRobotV3Writer(options=WriterOptions(encode_in_subprocess=False, durable=False))
    with writer.resume(root) as session:
        values = ds.frame(1, 0, "m", episodes=EPISODES)
        with pytest.raises(FeatureMismatch, match="depth_unit 'mm'"):
            session.add_frame(values)
        for t in range(3):
            session.add_frame(ds.frame(1, t, "mm", episodes=EPISODES))
        session.save_episode()
    info = json.loads((root / "meta/info.json").read_text())["features"]
    assert info[ds.RGB]["info"]["video.codec"] == "av1"
    assert info[ds.DEPTH_VIDEO]["info"]["video.codec"] == "hevc"
    item = LeRobotDatasetReader(root)[len(EPISODES[0]) + 2]
    error = np.abs(item[ds.DEPTH_VIDEO][0].numpy() - np.rint(np.clip(ds.depth_mm(1, 2), 10, 1e4)))
    assert np.all(error <= quantum_mm(ds.depth_mm(1, 2)))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (np.zeros((ds.HEIGHT, ds.WIDTH, 1), np.uint8), "got uint8 values"),
        (np.zeros((ds.HEIGHT, ds.WIDTH, 1), np.float64), "got float64 values"),
        (np.zeros((ds.HEIGHT, ds.WIDTH, 3), np.uint16), r"of shape \(16, 32, 3\)"),
    ],
)
def test_bad_depth_frames_are_refused_by_name(tmp_path: Path, value, words) -> None:
    session = LeRobotV3Writer(options=WriterOptions(encode_in_subprocess=False)).create(
        tmp_path / "ds", fps=ds.FPS, features=ds.features(rgb=False)
    )
    with session:
        frame = ds.frame(0, 0, "mm", rgb=False)
        with pytest.raises(FeatureMismatch, match=words) as caught:
            session.add_frame({**frame, ds.DEPTH_VIDEO: value})
        assert "uint16 millimetres or float32 metres" in caught.value.message
        assert caught.value.where == f"frame[{ds.DEPTH_VIDEO!r}]"
        if value.shape[-1] == 1:
            assert ".astype(np.uint16)" in caught.value.hint
        session.add_frame(frame)
        session.save_episode()


def test_a_depth_camera_of_three_channels_is_refused(tmp_path: Path) -> None:
    features = {
        "depth": FeatureSpec("depth", "video", (16, 32, 3), ds.HWC, info={"is_depth_map": True})
    }
    writer = LeRobotV3Writer(options=WriterOptions(encode_in_subprocess=False))
    with pytest.raises(InvalidInput, match="one channel"):
        writer.create(tmp_path / "ds", fps=10, features=features)
