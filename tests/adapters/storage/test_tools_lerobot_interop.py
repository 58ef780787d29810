"""Datasets made by rlctl's tools open in LeRobot 0.6.1 and hold what the tools put in them;
relative action statistics match LeRobot's own.

Runs when RLCTL_LEROBOT_PYTHON names a Python with lerobot installed (e.g.
/tmp/lerobot-anchor/bin/python); skipped otherwise.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.adapters.storage.lerobot_v3.tools.stats_access import LeRobotStatsAccess
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
from rlctl.application.use_cases.merge_datasets import MergeDatasets
from rlctl.application.use_cases.recompute_stats import RecomputeRequest, RecomputeStats
from rlctl.domain.statistics import stats_from_json

pytestmark = [pytest.mark.lerobot, pytest.mark.slow]


def load_support():
    path = Path(__file__).with_name("tools_support.py")
    spec = importlib.util.spec_from_file_location("tools_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()
ws = support.writer

DUMP = """
import json, sys
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
root, out = sys.argv[1], sys.argv[2]
ds = LeRobotDataset("rlctl/tools", root=root, video_backend="pyav")
arrays, tasks = {}, []
for i in range(len(ds)):
    item = ds[i]
    tasks.append(item["task"])
    for key, value in item.items():
        if not isinstance(value, str):
            arrays[f"{i}/{key}"] = value.numpy()
np.savez(out, **arrays)
print(json.dumps({"len": len(ds), "episodes": ds.meta.total_episodes, "tasks": tasks}))
"""

RELATIVE = """
import json, sys
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.datasets.dataset_tools import recompute_stats
ds = LeRobotDataset("rlctl/tools", root=sys.argv[1], video_backend="pyav")
recompute_stats(ds, relative_action=True, relative_exclude_joints=["joint_1"], chunk_size=3)
print(json.dumps({k: v.tolist() for k, v in ds.meta.stats["action"].items()}))
"""


def assert_lerobot_sees(lerobot, root: Path, tmp_path: Path) -> None:
    out = tmp_path / f"{root.name}.npz"
    summary = lerobot("-c", DUMP, root, out)
    ours = support.items(root)
    assert summary["len"] == len(ours)
    assert summary["episodes"] == LeRobotMetaReader().read_meta(root).total_episodes
    with np.load(out) as arrays:
        for i, item in enumerate(ours):
            assert summary["tasks"][i] == item["task"]
            for key, value in item.items():
                if isinstance(value, torch.Tensor):
                    np.testing.assert_allclose(arrays[f"{i}/{key}"], value.numpy(), atol=1e-6)


def test_lerobot_opens_merged_and_edited_datasets(lerobot, tmp_path, fixtures_dir):
    plan = ws.DatasetPlan(
        fps=10,
        state_dim=6,
        episodes=(("pick the cube",) * 5, ("new task",) * 4),
        video=True,
    )
    ws.write(tmp_path / "ours", plan)
    theirs = support.copy_dataset(fixtures_dir / "sim_video", tmp_path / "theirs")
    tools = (LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress())
    merged = tmp_path / "merged"
    MergeDatasets(*tools)(
        [str(theirs), str(support.copy_dataset(theirs, tmp_path / "b"))], str(merged)
    )
    assert_lerobot_sees(lerobot, merged, tmp_path)
    DeleteEpisodes(*tools)(str(merged), "1,3")
    assert_lerobot_sees(lerobot, merged, tmp_path)
    merged_ours = tmp_path / "merged_ours"
    copy = support.copy_dataset(tmp_path / "ours", tmp_path / "ours2")
    MergeDatasets(*tools)([str(tmp_path / "ours"), str(copy)], str(merged_ours))
    assert_lerobot_sees(lerobot, merged_ours, tmp_path)


def test_relative_action_stats_match_lerobots(lerobot, tmp_path, fixtures_dir):
    root = support.copy_dataset(fixtures_dir / "sim_video", tmp_path / "ds")
    copy = support.copy_dataset(root, tmp_path / "lerobot")
    RecomputeStats(LeRobotMetaReader(), LeRobotStatsAccess(), SilentProgress())(
        RecomputeRequest(
            str(root), relative_actions=True, chunk_size=3, exclude_joints=("joint_1",)
        )
    )
    theirs = lerobot("-c", RELATIVE, copy)
    ours = stats_from_json(LeRobotMetaReader().read_meta(root).stats)["action"]
    np.testing.assert_allclose(ours.mean, theirs["mean"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.std, theirs["std"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ours.min, theirs["min"], atol=1e-6)
    np.testing.assert_allclose(ours.max, theirs["max"], atol=1e-6)
    assert ours.count == theirs["count"][0]
    # Quantiles: both approximate (histograms), within a percent of the range.
    spread = np.asarray(theirs["max"]) - np.asarray(theirs["min"])
    for q in ("q01", "q50", "q99"):
        assert np.all(np.abs(ours.quantiles[q] - theirs[q]) <= 0.02 * spread + 1e-6), q
