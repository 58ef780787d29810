"""`recompute-stats` on real files: the statistics the writer (or LeRobot) wrote come back, and
relative action statistics land in stats.json's `action`, LeRobot's convention."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.tools.sources import stats_from_columns
from rlctl.adapters.storage.lerobot_v3.tools.stats_access import LeRobotStatsAccess
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.application.use_cases.recompute_stats import RecomputeRequest, RecomputeStats
from rlctl.domain.statistics import stats_from_json


def load_support():
    path = Path(__file__).with_name("tools_support.py")
    spec = importlib.util.spec_from_file_location("tools_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()
ws = support.writer
PLAN = ws.DatasetPlan(
    fps=10,
    state_dim=3,
    episodes=(("pick",) * 7, ("place",) * 5, ("pick",) * 9),
    video=True,
    grid=(2, 2, 3),
)


def recompute(root: Path, **options) -> object:
    use_case = RecomputeStats(LeRobotMetaReader(), LeRobotStatsAccess(), SilentProgress())
    return use_case(RecomputeRequest(str(root), **options))


def stats_json(root: Path) -> dict:
    return stats_from_json(LeRobotMetaReader().read_meta(root).stats)


def episode_stats(root: Path) -> list[dict]:
    return [stats_from_columns(e.columns, "") for e in LeRobotMetaReader().read_meta(root).episodes]


def assert_close(got, expected, atol=1e-6) -> None:
    for name in ("min", "max", "mean", "std"):
        np.testing.assert_allclose(getattr(got, name), getattr(expected, name), atol=atol)
    assert got.count == expected.count


def test_recomputed_statistics_are_the_written_ones(tmp_path):
    root = tmp_path / "ds"
    ws.write(root, PLAN)
    written, written_episodes = stats_json(root), episode_stats(root)
    (root / "meta/stats.json").unlink()
    result = recompute(root)
    assert result.episodes == 3 and ws.VIDEO in result.features
    stats = stats_json(root)
    for key in (ws.STATE, ws.ACTION, ws.GRID, "index", "frame_index", "timestamp"):
        assert_close(stats[key], written[key])
    assert stats[ws.GRID].shape == (3,)
    # Decoded frames differ from the recorded ones by the codec's loss.
    assert_close(stats[ws.VIDEO], written[ws.VIDEO], atol=0.03)
    for got, expected in zip(episode_stats(root), written_episodes):
        assert_close(got[ws.ACTION], expected[ws.ACTION])
        assert_close(got[ws.GRID], expected[ws.GRID])
    report = CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))
    assert report.ok and not report.problems


def test_relative_actions_replace_stats_json_action_only(tmp_path):
    root = tmp_path / "ds"
    ws.write(root, PLAN)
    absolute = episode_stats(root)
    result = recompute(root, relative_actions=True, chunk_size=4, exclude_joints=("joint_2",))
    table = pq.read_table(root / "data/chunk-000/file-000.parquet")
    actions = np.stack(table.column(ws.ACTION).to_numpy(zero_copy_only=False))
    states = np.stack(table.column(ws.STATE).to_numpy(zero_copy_only=False))
    episode = table.column("episode_index").to_numpy()
    starts = [s for s in range(len(episode) - 3) if episode[s] == episode[s + 3]]
    assert result.relative_chunks == len(starts) == 4 + 2 + 6
    chunks = np.stack([actions[s : s + 4] - states[s] * np.array([1, 1, 0]) for s in starts])
    values = chunks.reshape(-1, 3)
    stats = stats_json(root)
    np.testing.assert_allclose(stats[ws.ACTION].mean, values.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(stats[ws.ACTION].std, values.std(axis=0), rtol=1e-5)
    assert stats[ws.ACTION].count == len(values)
    for got, expected in zip(episode_stats(root), absolute):
        assert_close(got[ws.ACTION], expected[ws.ACTION])


def test_lerobots_image_dataset_gets_its_own_statistics_back(fixtures_dir, tmp_path):
    root = support.copy_dataset(fixtures_dir / "sim_images", tmp_path / "sim_images")
    written = stats_json(root)
    recompute(root)
    stats = stats_json(root)
    for key in ("observation.state", "action"):
        assert_close(stats[key], written[key], atol=1e-6)
    # LeRobot averages images in float32; rlctl in float64.
    assert_close(stats["observation.images.front"], written["observation.images.front"], atol=1e-4)
