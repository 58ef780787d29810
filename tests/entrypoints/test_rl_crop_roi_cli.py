"""`rlctl dataset crop-roi` (LeRobot's `crop_dataset_roi`) on a small recorded dataset: a video
camera and a camera stored as images, each cropped to its region and resized, into a new dataset
(the source untouched), the cameras' statistics recomputed from the new frames, episodes, tasks
and the other columns as they were; bad regions refused in one line; LeRobot 0.6.1 reads it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.tools.frame_crop import crop_resize
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.features import FeatureSpec
from rlctl.domain.rl.roi import RegionCrop
from rlctl.entrypoints.cli.main import cli

HWC = ["height", "width", "channels"]
FRONT, WRIST = "observation.images.front", "observation.images.wrist"
REGIONS = {FRONT: [8, 16, 32, 40], WRIST: [4, 2, 20, 24]}
SIZE = (24, 20)


def frame(height: int, width: int, t: int) -> np.ndarray:
    """A smooth pattern (video compression keeps it) that differs across the frame and in time."""
    rows, cols = np.mgrid[0:height, 0:width]
    red = rows * 200 // height + t
    green = cols * 200 // width
    blue = np.full_like(rows, 40 + 5 * t)
    return np.stack([red, green, blue], axis=-1).astype(np.uint8)


def record(root: Path) -> Path:
    features = {
        FRONT: FeatureSpec(FRONT, "video", (48, 64, 3), names=HWC),
        WRIST: FeatureSpec(WRIST, "image", (32, 32, 3), names=HWC),
        "observation.state": FeatureSpec("observation.state", "float32", (2,)),
        "action": FeatureSpec("action", "float32", (2,)),
        "next.reward": FeatureSpec("next.reward", "float32", (1,)),
    }
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    with LeRobotV3Writer(options=options).create(root, fps=10, features=features) as session:
        for episode, length in enumerate((6, 5)):
            for t in range(length):
                session.add_frame(
                    {
                        FRONT: frame(48, 64, t),
                        WRIST: frame(32, 32, 2 * t),
                        "observation.state": np.float32([episode, t]),
                        "action": np.float32([t, -t]),
                        "next.reward": np.float32(t == length - 1),
                        "task": f"task {episode}",
                    }
                )
            session.save_episode()
    return root


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def crop(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["dataset", "crop-roi", *args, "--progress=silent"])


@pytest.mark.slow
def test_crop_roi_writes_a_new_dataset_with_cropped_cameras(tmp_path: Path) -> None:
    from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset

    source = record(tmp_path / "demo")
    before = files(source)
    params = tmp_path / "crop_params.json"
    params.write_text(json.dumps(REGIONS))
    result = crop(str(source), f"--crop-params-path={params}", "--resize", *map(str, SIZE))
    assert result.exit_code == 0, result.output
    out = tmp_path / "demo_cropped_resized"
    assert f"-> {out}: 2 episodes, 11 frames, 2 tasks" in result.output
    assert files(source) == before  # the user's dataset is untouched

    info = json.loads((out / "meta" / "info.json").read_text())
    for key in (FRONT, WRIST):
        assert info["features"][key]["shape"] == [*SIZE, 3]
    assert info["features"][FRONT]["dtype"] == "video"
    assert info["features"][FRONT]["info"]["video.height"] == SIZE[0]
    assert info["features"][WRIST]["dtype"] == "image"

    new, old = LeRobotTorchDataset(out), LeRobotTorchDataset(source)
    assert len(new) == 11
    wrist_frames = []
    for index in range(len(new)):
        item, was = new[index], old[index]
        np.testing.assert_array_equal(item["observation.state"], was["observation.state"])
        assert item["task"] == was["task"]
        for key, tolerance in ((WRIST, 0.0), (FRONT, 12 / 255)):
            original = (np.moveaxis(np.asarray(was[key]), 0, -1) * 255).round().astype(np.uint8)
            wanted = crop_resize(original, RegionCrop(*REGIONS[key], size=SIZE)) / 255.0
            got = np.moveaxis(np.asarray(item[key]), 0, -1)
            assert got.shape == (*SIZE, 3)
            # Images are PNGs (lossless); the video camera went through the encoder again.
            assert np.abs(got - wanted).mean() <= tolerance + 1e-6, key
        wrist_frames.append(np.moveaxis(np.asarray(item[WRIST]), 0, -1))

    stats = json.loads((out / "meta" / "stats.json").read_text())
    mean = np.asarray(stats[WRIST]["mean"]).reshape(3)
    np.testing.assert_allclose(mean, np.stack(wrist_frames).mean(axis=(0, 1, 2)), atol=0.01)
    old_stats = json.loads((source / "meta" / "stats.json").read_text())
    assert stats["action"] == old_stats["action"]
    assert stats[FRONT]["mean"] != old_stats[FRONT]["mean"]


@pytest.mark.slow
def test_crop_roi_refuses_bad_regions_in_one_line(tmp_path: Path) -> None:
    source = tmp_path / "demo"
    # Refused before any frame is read: the metadata is enough.
    features = {
        WRIST: FeatureSpec(WRIST, "image", (32, 32, 3), names=HWC),
        "action": FeatureSpec("action", "float32", (1,)),
    }
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    with LeRobotV3Writer(options=options).create(source, fps=10, features=features) as session:
        session.add_frame({WRIST: frame(32, 32, 0), "action": np.float32([0]), "task": "t"})
        session.save_episode()
    before = files(source)
    cases = {
        json.dumps({WRIST: [10, 10, 30, 5]}): "goes past the 32x32 frame",
        json.dumps({WRIST: [0, 0, 0, 5]}): "is empty or negative",
        json.dumps({WRIST: [0, 0, 5]}): "four whole numbers",
        json.dumps({"observation.images.top": [0, 0, 5, 5]}): "is not a camera",
        json.dumps({"action": [0, 0, 1, 1]}): "is not a camera",
        "[1, 2]": "a JSON object is needed",
    }
    for params, message in cases.items():
        result = crop(str(source), f"--crop-params={params}")
        assert result.exit_code == 1 and message in result.output, (params, result.output)
        assert "hint:" in result.output or "JSON" in result.output
    # Not JSON at all (a shell ate the quotes): the hint shows a region, not some other
    # option's example.
    result = crop(str(source), "--crop-params={observation.images.wrist: [0, 0, 8, 8]}")
    assert result.exit_code == 1 and "not JSON" in result.output
    assert '"observation.images.front": [0, 0, 240, 320]' in result.output
    result = crop(str(source))
    assert result.exit_code == 1 and "--crop-params or --crop-params-path" in result.output
    # An output that holds something is never written over.
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    result = crop(
        str(source), f"--crop-params={json.dumps({WRIST: [0, 0, 8, 8]})}", "-o", str(taken)
    )
    assert result.exit_code == 1 and "already there" in result.output
    assert (taken / "notes.txt").read_text() == "mine"
    assert files(source) == before
    assert not (tmp_path / "demo_cropped_resized").exists()


@pytest.mark.slow
@pytest.mark.lerobot
def test_lerobot_reads_a_cropped_dataset(tmp_path: Path, lerobot) -> None:  # type: ignore[no-untyped-def]
    source = record(tmp_path / "demo")
    out = tmp_path / "cropped"
    result = crop(str(source), f"--crop-params={json.dumps(REGIONS)}", "-o", str(out))
    assert result.exit_code == 0, result.output
    code = (
        "import json, sys\n"
        "from lerobot.datasets import LeRobotDataset\n"
        f"d = LeRobotDataset('local/cropped', root={str(out)!r})\n"
        "item = d[7]\n"
        "print(json.dumps({'n': len(d), 'episodes': d.meta.total_episodes,"
        f" 'front': list(item[{FRONT!r}].shape), 'wrist': list(item[{WRIST!r}].shape),"
        f" 'mean': d.meta.stats[{WRIST!r}]['mean'].reshape(-1).tolist()}}))\n"
    )
    seen = lerobot("-c", code)
    assert seen["n"] == 11 and seen["episodes"] == 2
    assert seen["front"] == [3, 128, 128] and seen["wrist"] == [3, 128, 128]
    stats = json.loads((out / "meta" / "stats.json").read_text())
    np.testing.assert_allclose(seen["mean"], np.asarray(stats[WRIST]["mean"]).reshape(-1))
