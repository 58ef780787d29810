"""`rlctl dataset check` on a fault corpus: copies of LeRobot's fixture broken in several ways at
once; the check lists each problem, naming its file (and key or episode), and goes on."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.application.use_cases.check_dataset import CheckDataset, CheckReport


def load_support():
    path = Path(__file__).with_name("tools_support.py")
    spec = importlib.util.spec_from_file_location("tools_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()
INFO = "meta/info.json"
STATS = "meta/stats.json"
TASKS = "meta/tasks.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
DATA = "data/chunk-000/file-000.parquet"
VIDEO = "videos/observation.images.front/chunk-000/file-000.mp4"


@pytest.fixture
def sim_video(fixtures_dir: Path, tmp_path: Path) -> Path:
    return support.copy_dataset(fixtures_dir / "sim_video", tmp_path / "sim_video")


@pytest.fixture
def sim_images(fixtures_dir: Path, tmp_path: Path) -> Path:
    return support.copy_dataset(fixtures_dir / "sim_images", tmp_path / "sim_images")


def check(root: Path) -> CheckReport:
    return CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))


def errors_about(report: CheckReport, file: str) -> list[str]:
    return [p.message for p in report.errors if p.file == file]


def edit_parquet(path: Path, change) -> None:
    table = pq.read_table(path)
    columns = table.to_pydict()
    change(columns)
    pq.write_table(pa.table(columns, schema=table.schema), path)


def edit_json(path: Path, change) -> None:
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content, indent=4))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_lerobots_datasets_pass(fixtures_dir):
    for name in ("sim_video", "sim_images"):
        report = check(fixtures_dir / name)
        assert report.ok and not report.problems, report.problems
        assert report.files_checked == (2 if name == "sim_video" else 1)


def test_truncated_data_and_missing_video_are_both_listed(sim_video):
    truncate(sim_video / DATA)
    (sim_video / VIDEO).unlink()
    report = check(sim_video)
    assert not report.ok
    assert errors_about(report, DATA) and "cannot be read" in errors_about(report, DATA)[0]
    missing = errors_about(report, VIDEO)
    assert missing and "missing" in missing[0] and "0, 1, 2" in missing[0]


def test_bad_stats_json_and_mismatched_indices_are_both_listed(sim_video):
    (sim_video / STATS).write_text("{ not json")
    edit_parquet(sim_video / DATA, lambda c: c.update(index=[i + 1 for i in c["index"]]))
    report = check(sim_video)
    assert "not valid JSON" in errors_about(report, STATS)[0]
    index_problems = [p for p in report.errors if p.file == DATA and p.key == "index"]
    assert [p.episode for p in index_problems] == [0, 1, 2], report.problems
    assert "should run over [0, 20), found [1, 21)" in index_problems[0].message


def test_bad_json_in_info_names_the_file(sim_video):
    (sim_video / INFO).write_text('{"codebase_version": "v3.0",')
    report = check(sim_video)
    assert [p.file for p in report.errors] == [INFO]
    assert "not valid JSON" in report.errors[0].message and report.errors[0].hint


@pytest.mark.parametrize(("version", "advice"), [("v2.1", "convert"), ("v4.0", "upgrade")])
def test_wrong_version_names_the_key_and_what_to_do(sim_video, version, advice):
    edit_json(sim_video / INFO, lambda info: info.update(codebase_version=version))
    (problem,) = check(sim_video).errors
    assert (problem.file, problem.key) == (INFO, "codebase_version")
    assert advice in problem.hint


def test_episode_metadata_faults_are_listed_per_episode(sim_video):
    edit_parquet(
        sim_video / EPISODES,
        lambda c: c.update(length=[21, 26, 30], tasks=[["pick the cube"], ["nope"], c["tasks"][2]]),
    )
    edit_json(sim_video / INFO, lambda info: info.update(total_frames=99))
    report = check(sim_video)
    lengths = [p.episode for p in report.errors if p.file == EPISODES and p.key == "length"]
    assert lengths == [0, 1]
    # LeRobot loads an episode naming an unknown task: a warning, as the reader logs it.
    assert any(p.key == "tasks" and p.episode == 1 for p in report.warnings)
    assert any(p.file == INFO and p.key == "total_frames" for p in report.errors)
    # The data file is still read and compared with what the metadata says.
    assert any(p.file == DATA and p.key == "episode_index" for p in report.errors)


def test_corrupt_video_and_wrong_frame_counts(sim_video):
    edit_parquet(
        sim_video / EPISODES,
        lambda c: c.update({"videos/observation.images.front/to_timestamp": [1.5, 5.0, 7.5]}),
    )
    report = check(sim_video)
    counts = [p.episode for p in report.errors if p.file == VIDEO]
    assert counts == [0, 1], report.problems
    truncate(sim_video / VIDEO)
    messages = [p.message for p in check(sim_video).errors if p.file == VIDEO]
    assert any("cut short" in m or "cannot be read" in m for m in messages), messages


def test_images_and_task_indices_are_checked(sim_images):
    def damage(columns):
        images = columns["observation.images.front"]
        images[3] = {"bytes": b"\x89PNG broken", "path": None}
        columns["task_index"][5] = 9

    edit_parquet(sim_images / DATA, damage)
    report = check(sim_images)
    keys = sorted((p.key, p.episode) for p in report.errors)
    assert keys == [("observation.images.front", 0), ("task_index", 0)], report.problems


def test_an_unfinished_commit_is_a_warning_and_the_dataset_reads(tmp_path):
    # A kill between the meta/episodes and info.json renames leaves one more episodes row, its
    # rows and its task, than info.json counts: readers ignore them, check only warns.
    root = tmp_path / "ds"
    plan = support.writer.DatasetPlan(
        fps=10, state_dim=2, episodes=(("a",) * 3, ("b",) * 4, ("c",) * 2), video=True
    )
    support.writer.write(root, plan)
    edit_json(
        root / INFO, lambda info: info.update(total_episodes=2, total_frames=7, total_tasks=2)
    )
    meta = LeRobotMetaReader().read_meta(root)
    assert (meta.total_episodes, len(meta.episodes), meta.total_frames) == (2, 2, 7)
    assert len(LeRobotDatasetReader(root, video_backend="pyav")) == 7
    report = check(root)
    assert report.ok, report.errors
    assert {p.file for p in report.warnings} == {
        "meta/episodes/chunk-000/file-000.parquet",
        TASKS,
        "data/chunk-000/file-000.parquet",
    }
