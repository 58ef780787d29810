"""Depth cameras both ways with LeRobot 0.6.1: a depth dataset LeRobot records reads the same in
rlctl (every item to the bit, statistics included), rlctl records the same files (info.json,
TIFFs, 12-bit codes) that LeRobot reads back as its own, and rlctl's tools keep them readable.

Runs when RLCTL_LEROBOT_PYTHON names a Python with lerobot installed (e.g.
/tmp/lerobot-anchor/bin/python); skipped otherwise.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
from rlctl.application.use_cases.merge_datasets import MergeDatasets
from rlctl.application.use_cases.split_dataset import SplitDataset

pytestmark = [
    pytest.mark.lerobot,
    pytest.mark.slow,
]


def load_support():
    path = Path(__file__).with_name("depth_support.py")
    spec = importlib.util.spec_from_file_location("depth_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ds = load_support()
DELTAS = {ds.DEPTH_VIDEO: [-1 / ds.FPS, 0.0], ds.DEPTH_IMAGE: [0.0, 1 / ds.FPS]}
CAMERAS = [ds.DEPTH_VIDEO, ds.DEPTH_IMAGE]


def write_job(root: Path, unit: str, tmp_path: Path) -> dict[str, Any]:
    arrays = {
        f"{ep}/{t}/{key}": value
        for ep, episode in enumerate(ds.frames(unit))
        for t, values in enumerate(episode)
        for key, value in values.items()
        if key != "task"
    }
    np.savez(tmp_path / f"frames-{unit}.npz", **arrays)
    return {
        "do": "write",
        "root": str(root),
        "fps": ds.FPS,
        "features": {key: spec.to_info() for key, spec in ds.features().items()},
        "episodes": [list(tasks) for tasks in ds.EPISODES],
        "frames": str(tmp_path / f"frames-{unit}.npz"),
    }


def dump_job(root: Path, tmp_path: Path) -> dict[str, Any]:
    return {
        "do": "dump",
        "root": str(root),
        "out": str(tmp_path / f"{root.name}.npz"),
        "deltas": DELTAS,
        "stats_keys": CAMERAS,
        "computed_keys": [],
    }


def items(root: Path) -> list[dict[str, Any]]:
    reader = LeRobotDatasetReader(root, delta_timestamps=DELTAS, video_backend="pyav")
    return reader.get_items(range(len(reader)))


def assert_same_items(ours: list[dict[str, Any]], summary: dict, arrays: Path) -> None:
    """rlctl's items are LeRobot's: keys, dtypes, shapes, values; cameras within `rgb` only."""
    assert summary["len"] == len(ours)
    with np.load(arrays) as theirs:
        for i, item in enumerate(ours):
            assert item["task"] == summary["tasks"][i]
            tensors = {k: v.numpy() for k, v in item.items() if isinstance(v, torch.Tensor)}
            assert sorted(f"{i}/{k}" for k in tensors) == sorted(
                k for k in theirs.files if k.startswith(f"{i}/")
            )
            for key, value in tensors.items():
                other = theirs[f"{i}/{key}"]
                assert (value.dtype, value.shape) == (other.dtype, other.shape), key
                if key == ds.RGB:  # two AV1 encodes of the same frames
                    assert np.abs(value - other).mean() < 2 / 255
                else:
                    np.testing.assert_array_equal(value, other, err_msg=f"{i}/{key}")


@pytest.mark.parametrize("unit", ["mm", "m"])
def test_depth_cameras_are_lerobots_both_ways(lerobot_jobs, tmp_path: Path, unit: str) -> None:
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    ds.write(ours, unit)
    dumps = lerobot_jobs(
        [write_job(theirs, unit, tmp_path), dump_job(theirs, tmp_path), dump_job(ours, tmp_path)]
    )
    _, their_summary, our_summary = dumps
    # rlctl reads LeRobot's dataset as LeRobot does, and LeRobot reads rlctl's the same way.
    assert_same_items(items(theirs), their_summary, tmp_path / "theirs.npz")
    assert_same_items(items(ours), our_summary, tmp_path / "ours.npz")
    with np.load(tmp_path / "theirs.npz") as a, np.load(tmp_path / "ours.npz") as b:
        for key in a.files:
            if ds.RGB not in key:  # the same depth codes and TIFFs, so the same items
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        first = a[f"0/{ds.DEPTH_VIDEO}"]
        assert first.dtype == np.float32 and first.shape == (2, 1, ds.HEIGHT, ds.WIDTH)

    # The same files: info.json's features and the image column's TIFFs.
    info = [json.loads((r / "meta/info.json").read_text())["features"] for r in (theirs, ours)]
    assert info[0] == info[1]
    assert info[1][ds.DEPTH_VIDEO]["info"]["depth_unit"] == unit
    assert info[1][ds.DEPTH_VIDEO]["info"]["video.pix_fmt"] == "gray12le"
    tiffs = [
        pq.read_table(r / "data/chunk-000/file-000.parquet").column(ds.DEPTH_IMAGE).to_pylist()
        for r in (theirs, ours)
    ]
    assert tiffs[0] == tiffs[1]

    # Statistics: recorded in the frames' unit, read (both sides) in millimetres.
    for root, summary in ((theirs, their_summary), (ours, our_summary)):
        stats = LeRobotDatasetReader(root).meta.stats
        for key in CAMERAS:
            for name, value in summary["stats"][key].items():
                np.testing.assert_allclose(stats[key][name], value, rtol=1e-6, err_msg=name)
    for key in CAMERAS:
        for name in ("min", "max", "mean", "std", "count"):
            np.testing.assert_allclose(
                our_summary["stats"][key][name], their_summary["stats"][key][name], rtol=1e-6
            )


def test_tools_keep_depth_cameras_readable_by_lerobot(lerobot_jobs, tmp_path: Path) -> None:
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    ds.write(ours, "mm")
    lerobot_jobs([write_job(theirs, "mm", tmp_path)])
    tools = (LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress())
    merged, part = tmp_path / "merged", tmp_path / "part"
    MergeDatasets(*tools)([str(theirs), str(ours)], str(merged))
    SplitDataset(*tools)(str(merged), str(part), episodes="1,3,5")
    DeleteEpisodes(*tools)(str(merged), "0,4")
    roots = (merged, part)
    for root, summary in zip(roots, lerobot_jobs([dump_job(r, tmp_path) for r in roots])):
        report = CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))
        assert report.ok and not report.warnings, report.problems
        assert_same_items(items(root), summary, tmp_path / f"{root.name}.npz")
    # Episode 1 of the merge (theirs) is episode 0 of the split, its depth unchanged.
    split = items(part)
    source = items(theirs)
    episode = LeRobotMetaReader().read_meta(theirs).episodes[1]
    for t in range(episode.length):
        first = episode.dataset_from_index
        for key in CAMERAS:
            assert torch.equal(split[t][key], source[first + t][key]), (t, key)
