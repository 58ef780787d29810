"""Numeric features of rank 2 and more (LeRobot's `datasets` Array2D…Array5D) both ways with
LeRobot 0.6.1: the same parquet schema, the same items (windows included), the same statistics,
and rlctl's tools on such datasets give datasets LeRobot reads.

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
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.adapters.storage.lerobot_v3.tools.stats_access import LeRobotStatsAccess
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
from rlctl.application.use_cases.merge_datasets import MergeDatasets
from rlctl.application.use_cases.recompute_stats import RecomputeRequest, RecomputeStats
from rlctl.application.use_cases.split_dataset import SplitDataset
from rlctl.domain.statistics import stats_from_json

pytestmark = [
    pytest.mark.lerobot,
    pytest.mark.slow,
]


def load_support():
    path = Path(__file__).with_name("writer_support.py")
    spec = importlib.util.spec_from_file_location("writer_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ws = load_support()
GRID = ws.GRID
EPISODES = (("pick",) * 4, ("place",) * 3, ("pick",) * 5)


def deltas(fps: int) -> dict[str, list[float]]:
    return {GRID: [-1 / fps, 0.0, 1 / fps], ws.ACTION: [0.0, 1 / fps]}


def dump_job(root: Path, out: Path, fps: int) -> dict[str, Any]:
    return {
        "do": "dump",
        "root": str(root),
        "out": str(out),
        "deltas": deltas(fps),
        "stats_keys": [GRID, ws.STATE],
    }


def assert_same_items(root: Path, summary: dict, out: Path, fps: int) -> None:
    """rlctl's items of `root` are LeRobot's: keys, dtypes, shapes and values."""
    reader = LeRobotDatasetReader(root, delta_timestamps=deltas(fps), video_backend="pyav")
    assert summary["len"] == len(reader)
    with np.load(out) as arrays:
        for i, item in enumerate(reader.get_items(range(len(reader)))):
            assert item["task"] == summary["tasks"][i]
            tensors = {k: v for k, v in item.items() if isinstance(v, torch.Tensor)}
            assert sorted(f"{i}/{k}" for k in tensors) == sorted(
                k for k in arrays.files if k.startswith(f"{i}/")
            )
            for key, value in tensors.items():
                theirs = arrays[f"{i}/{key}"]
                assert (value.numpy().dtype, value.numpy().shape) == (theirs.dtype, theirs.shape)
                np.testing.assert_array_equal(value.numpy(), theirs, err_msg=f"{i}/{key}")


def assert_stats_match(ours: dict, theirs: dict) -> None:
    """Moments and count equal to LeRobot's; quantiles approximate on both sides."""
    for name in ("min", "max"):
        np.testing.assert_array_equal(np.asarray(ours[name]), np.asarray(theirs[name]), name)
    for name in ("mean", "std"):
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-6, atol=1e-7, err_msg=name)
    assert ours["count"] == theirs["count"]
    for name in ("q01", "q50", "q99"):
        assert np.shape(ours[name]) == np.shape(theirs[name]), name


def expected_window(plan, ep: int, t: int) -> np.ndarray:
    last = plan.lengths[ep] - 1
    return np.stack([ws.frame(plan, ep, min(max(t + d, 0), last))[GRID] for d in (-1, 0, 1)])


@pytest.mark.parametrize(("shape", "dtype"), [((2, 3), "float32"), ((2, 1, 2, 2), "float64")])
def test_lerobot_reads_rlctls_rank_2_plus_features(lerobot_jobs, tmp_path, shape, dtype) -> None:
    plan = ws.DatasetPlan(fps=10, state_dim=3, episodes=EPISODES, grid=shape, grid_dtype=dtype)
    root = tmp_path / "ds"
    ws.write(root, plan)
    out = tmp_path / "items.npz"
    (summary,) = lerobot_jobs([dump_job(root, out, plan.fps)])
    assert_same_items(root, summary, out, plan.fps)
    with np.load(out) as arrays:
        position = 0
        for ep, length in enumerate(plan.lengths):
            for t in range(length):
                window = arrays[f"{position}/{GRID}"]
                assert window.dtype == np.float32 and window.shape == (3, *shape)
                np.testing.assert_allclose(window, expected_window(plan, ep, t), rtol=1e-7)
                position += 1
    ours = json.loads((root / "meta/stats.json").read_text())
    for key in (GRID, ws.STATE):
        assert_stats_match(ours[key], summary["computed"][key])
        assert_stats_match(ours[key], summary["stats"][key])


def test_rlctl_reads_lerobots_rank_3_features_and_its_tools_keep_them(
    lerobot_jobs, tmp_path
) -> None:
    plan = ws.DatasetPlan(
        fps=10, state_dim=3, episodes=EPISODES, grid=(4, 4, 3), grid_dtype="int16"
    )
    frames = {
        f"{ep}/{t}/{key}": value
        for ep, length in enumerate(plan.lengths)
        for t in range(length)
        for key, value in ws.frame(plan, ep, t).items()
        if key != "task"
    }
    np.savez(tmp_path / "frames.npz", **frames)
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    features = {key: spec.to_info() for key, spec in plan.features().items()}
    write = {
        "do": "write",
        "root": str(theirs),
        "fps": plan.fps,
        "features": features,
        "episodes": [list(tasks) for tasks in plan.episodes],
        "frames": str(tmp_path / "frames.npz"),
    }
    _, summary = lerobot_jobs([write, dump_job(theirs, tmp_path / "theirs.npz", plan.fps)])
    assert_same_items(theirs, summary, tmp_path / "theirs.npz", plan.fps)

    # rlctl writes the same content to a data file of the same schema.
    ws.write(ours, plan)
    schemas = [pq.read_schema(r / "data/chunk-000/file-000.parquet") for r in (theirs, ours)]
    assert schemas[0].field(GRID).type == schemas[1].field(GRID).type
    assert schemas[0].field(GRID).metadata == schemas[1].field(GRID).metadata
    hf = [json.loads(s.metadata[b"huggingface"])["info"]["features"] for s in schemas]
    assert hf[0] == hf[1]
    assert hf[0][GRID] == {"shape": [4, 4, 3], "dtype": "int16", "_type": "Array3D"}

    # Recomputed statistics are LeRobot's.
    RecomputeStats(LeRobotMetaReader(), LeRobotStatsAccess(), SilentProgress())(
        RecomputeRequest(str(theirs))
    )
    recomputed = stats_from_json(LeRobotMetaReader().read_meta(theirs).stats)[GRID].to_json()
    assert_stats_match(recomputed, summary["stats"][GRID])

    # Merge LeRobot's dataset with rlctl's, split and delete: LeRobot reads each result as
    # rlctl does.
    tools = (LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress())
    merged, part = tmp_path / "merged", tmp_path / "part"
    MergeDatasets(*tools)([str(theirs), str(ours)], str(merged))
    SplitDataset(*tools)(str(merged), str(part), episodes="1,3,5")
    DeleteEpisodes(*tools)(str(merged), "0,4")
    jobs = [dump_job(root, tmp_path / f"{root.name}.npz", plan.fps) for root in (merged, part)]
    for root, result in zip((merged, part), lerobot_jobs(jobs)):
        assert_same_items(root, result, tmp_path / f"{root.name}.npz", plan.fps)
        written = json.loads((root / "meta/stats.json").read_text())[GRID]
        assert_stats_match(written, result["computed"][GRID])
    assert LeRobotMetaReader().read_meta(merged).total_episodes == 4
