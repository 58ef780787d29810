"""Converting LeRobot v2.1 datasets to v3.0: the items read back are those of the original."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.adapters.storage.lerobot_v21.source import LeRobotV21Reader
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.application.use_cases.convert_dataset import ConvertDataset
from rlctl.domain.errors import DatasetVersionError
from rlctl.domain.statistics import FeatureStats, aggregate_stats, stats_from_json


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
    episodes=(("pick",) * 6, ("place", "place", "pick"), ("push",) * 4),
    video=True,
    image=True,
    reward=True,
)
# Two lossy encodings (the original's AV1, the v2.1 copy's h264) between the frames compared.
TOLERANCE = ws.VIDEO_TOLERANCE


def convert(root: Path, output: Path | None = None):
    use_case = ConvertDataset(
        LeRobotV21Reader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress()
    )
    return use_case(str(root), str(output) if output else None)


def assert_converted(original: Path, converted: Path) -> None:
    expected, got = support.items(original), support.items(converted)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        support.assert_same_frame(a, b, video_tolerance=TOLERANCE)
        for key in support.REINDEXED:
            assert int(a[key]) == int(b[key]), key  # conversion keeps the numbering
    report = CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(converted))
    assert report.ok and not report.warnings, report.problems
    assert support.info(converted)["codebase_version"] == "v3.0"


def test_a_v21_dataset_converts_to_the_same_items(tmp_path):
    ws.write(tmp_path / "v3", PLAN)
    legacy = support.make_v21(tmp_path / "v3", tmp_path / "v21")
    result = convert(legacy, tmp_path / "out")
    assert (result.from_version, result.original) == ("v2.1", None)
    assert (result.result.episodes, result.result.frames) == (3, 13)
    assert_converted(tmp_path / "v3", tmp_path / "out")
    # stats.json is the aggregate of episodes_stats.jsonl, as LeRobot's conversion writes it.
    lines = (legacy / "meta/episodes_stats.jsonl").read_text().splitlines()
    episodes = [
        {k: FeatureStats.from_json(v) for k, v in json.loads(line)["stats"].items()}
        for line in lines
    ]
    expected = aggregate_stats(episodes)
    stats = stats_from_json(LeRobotMetaReader().read_meta(tmp_path / "out").stats)
    for key in (ws.STATE, ws.ACTION, ws.IMAGE, ws.VIDEO):
        np.testing.assert_allclose(stats[key].mean, expected[key].mean)
        assert stats[key].count == expected[key].count


def test_lerobots_fixture_round_trips_through_v21_in_place(fixtures_dir, tmp_path):
    original = fixtures_dir / "sim_video"
    legacy = support.make_v21(original, tmp_path / "ds")
    with pytest.raises(DatasetVersionError) as caught:
        LeRobotMetaReader().read_meta(legacy)
    assert f"rlctl dataset convert {legacy}" in caught.value.hint
    result = convert(legacy)
    assert result.original == f"{legacy}.v2.1"
    assert (Path(result.original) / "meta/episodes.jsonl").is_file()
    assert_converted(original, legacy)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "ds.v2.1"]


def test_a_v20_dataset_gets_statistics_computed(tmp_path):
    ws.write(tmp_path / "v3", PLAN)
    legacy = support.make_v21(tmp_path / "v3", tmp_path / "v20")
    (legacy / "meta/episodes_stats.jsonl").unlink()
    info = json.loads((legacy / "meta/info.json").read_text())
    (legacy / "meta/info.json").write_text(json.dumps({**info, "codebase_version": "v2.0"}))
    convert(legacy, tmp_path / "out")
    assert_converted(tmp_path / "v3", tmp_path / "out")
    written = stats_from_json(LeRobotMetaReader().read_meta(tmp_path / "v3").stats)
    stats = stats_from_json(LeRobotMetaReader().read_meta(tmp_path / "out").stats)
    for key in (ws.STATE, ws.ACTION, ws.IMAGE):
        np.testing.assert_allclose(stats[key].mean, written[key].mean, rtol=1e-5, atol=1e-6)
    # The camera went through two lossy encodings: close, not equal.
    np.testing.assert_allclose(stats[ws.VIDEO].mean, written[ws.VIDEO].mean, atol=0.03)


def test_converting_a_v3_dataset_is_refused(fixtures_dir):
    with pytest.raises(DatasetVersionError, match="not v2"):
        convert(fixtures_dir / "sim_video")
