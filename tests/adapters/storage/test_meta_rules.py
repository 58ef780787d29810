"""One rulebook: the reader, resume and `rlctl dataset check` judge metadata alike.

For each fault below, applied to a copy of LeRobot's fixture: the reader refuses the folder if and
only if the check reports an error, and then the check's problems include the reader's message,
in the same file. What LeRobot 0.6.1 accepts (fractional file-size limits, absent optional keys,
unknown keys) both accept.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
from rlctl.application.use_cases.check_dataset import CheckDataset, CheckReport
from rlctl.domain.errors import DatasetError


def _load(name: str):
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _load("tools_support")
INFO = "meta/info.json"
STATS = "meta/stats.json"
TASKS = "meta/tasks.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
VIDEO_KEY = "observation.images.front"


def check(root: Path) -> CheckReport:
    return CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))


def read_all(root: Path) -> None:
    reader = LeRobotDatasetReader(root, video_backend="pyav")
    reader.get_items(range(len(reader)))


def info(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        content = json.loads((root / INFO).read_text())
        change(content)
        (root / INFO).write_text(json.dumps(content, indent=4))

    return apply


def set_info(**values: Any) -> Callable[[Path], None]:
    return info(lambda content: content.update(values))


def drop_info(key: str) -> Callable[[Path], None]:
    return info(lambda content: content.pop(key))


def feature(key: str, **values: Any) -> Callable[[Path], None]:
    return info(lambda content: content["features"][key].update(values))


def episodes(change: Callable[[dict[str, list]], Any], schema: bool = True) -> Callable:
    def apply(root: Path) -> None:
        table = pq.read_table(root / EPISODES)
        columns = table.to_pydict()
        change(columns)
        out = pa.table(columns, schema=table.schema) if schema else pa.table(columns)
        pq.write_table(out, root / EPISODES)

    return apply


def stats(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        content = json.loads((root / STATS).read_text())
        content = change(content) or content
        (root / STATS).write_text(json.dumps(content))

    return apply


def tasks_table(task_index: list[Any], task: list[str]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        pq.write_table(pa.table({"task_index": task_index, "task": task}), root / TASKS)

    return apply


def _popped(columns: dict[str, list], key: str) -> None:
    columns.pop(key)


ACCEPTED = {
    "fractional data file limit": set_info(data_files_size_in_mb=0.001),
    "fractional video file limit": set_info(video_files_size_in_mb=0.25),
    "whole numbers written as floats": set_info(fps=10.0, chunks_size=1000.0),
    "no data_files_size_in_mb": drop_info("data_files_size_in_mb"),
    "no video_files_size_in_mb": drop_info("video_files_size_in_mb"),
    "no chunks_size": drop_info("chunks_size"),
    "no data_path": drop_info("data_path"),
    "no robot_type": drop_info("robot_type"),
    "no total_tasks": drop_info("total_tasks"),
    "no splits": drop_info("splits"),
    "unknown keys": set_info(my_lab={"site": "Lyon"}, annotated_by=["a", "b"]),
    "more total_tasks than tasks (a warning)": set_info(total_tasks=5),
    "an episode names an unknown task (a warning)": episodes(
        lambda c: c.update(tasks=[["pick the cube"], ["juggle"], c["tasks"][2]])
    ),
    "stats of another shape (a warning)": stats(
        lambda s: s["action"].update(mean=[0.0], std=[1.0], min=[0.0], max=[1.0])
    ),
    "stats of a removed feature": stats(lambda s: s.update(gone={"mean": [1.0]})),
    "an episode's statistics of mixed shapes (a warning)": episodes(
        lambda c: c.update({"stats/action/mean": [[0.0], *c["stats/action/mean"][1:]]})
    ),
    "a newer minor version": set_info(codebase_version="v3.1"),
}

REFUSED = {
    "fps as a string": set_info(fps="10"),
    "fractional fps": set_info(fps=10.5),
    "zero fps": set_info(fps=0),
    "no fps": drop_info("fps"),
    "infinite total_frames": set_info(total_frames=float("inf")),
    "NaN total_episodes": set_info(total_episodes=float("nan")),
    "negative total_episodes": set_info(total_episodes=-1),
    "absurd total_frames": set_info(total_frames=10**30),
    "total_frames off": set_info(total_frames=76),
    "total_episodes off": set_info(total_episodes=4),
    "zero chunks_size": set_info(chunks_size=0),
    "negative data file limit": set_info(data_files_size_in_mb=-1),
    "data file limit as text": set_info(data_files_size_in_mb="100MB"),
    "robot_type an object": set_info(robot_type={"arm": "so101"}),
    "data_path escaping with ..": set_info(
        data_path="../elsewhere/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    ),
    "data_path absolute": set_info(data_path="/tmp/chunk-{chunk_index}/file-{file_index}.parquet"),
    "data_path with a huge width": set_info(data_path="data/{chunk_index:0999999999d}.parquet"),
    "data_path naming another field": set_info(data_path="data/{episode_index}.parquet"),
    "data_path an attribute lookup": set_info(data_path="data/{chunk_index.real}.parquet"),
    "data_path not a format string": set_info(data_path="data/{chunk_index.parquet"),
    "video_path escaping through the video key": set_info(video_path="videos/../../{video_key}"),
    "video_path missing with a video feature": drop_info("video_path"),
    "huge robot_type": set_info(robot_type="x" * 100_000),
    "features a list": set_info(features=[]),
    "no features": drop_info("features"),
    "feature shape text": feature("action", shape="six"),
    "feature shape negative": feature("action", shape=[-6]),
    "feature shape huge": feature("action", shape=[2**20, 2**20]),
    "feature dtype a number": feature("action", dtype=7),
    "feature info a list": feature(VIDEO_KEY, info=[1, 2]),
    "old version": set_info(codebase_version="v2.1"),
    "future version": set_info(codebase_version="v9.0"),
    "version a number": set_info(codebase_version=3.0),
    "info.json a list": lambda root: (root / INFO).write_text("[]"),
    "info.json not JSON": lambda root: (root / INFO).write_text("{"),
    "episode length off": episodes(lambda c: c.update(length=[20, 24, 30])),
    "episodes out of order": episodes(lambda c: c.update(episode_index=[0, 2, 1])),
    "a gap between episodes": episodes(
        lambda c: c.update(dataset_from_index=[0, 21, 45], dataset_to_index=[20, 46, 75])
    ),
    "negative episode start": episodes(
        lambda c: c.update(dataset_from_index=[-5, 15, 40], dataset_to_index=[15, 40, 70])
    ),
    "no data/file_index column": episodes(lambda c: _popped(c, "data/file_index"), schema=False),
    "data/chunk_index as text": episodes(
        lambda c: c.update({"data/chunk_index": ["../x", "0", "0"]}), schema=False
    ),
    "an empty video span": episodes(
        lambda c: c.update({f"videos/{VIDEO_KEY}/from_timestamp": [0.0, None, 4.5]})
    ),
    "an infinite video span": episodes(
        lambda c: c.update({f"videos/{VIDEO_KEY}/to_timestamp": [2.0, float("inf"), 7.5]})
    ),
    "tasks as text": episodes(lambda c: c.update(tasks=["a", "b", "c"]), schema=False),
    "stats.json a list": stats(lambda s: [1, 2]),
    "stats ragged": stats(lambda s: s["action"].update(mean=[[1.0], [1.0, 2.0]])),
    "stats as text": stats(lambda s: s["action"].update(mean="zero")),
    "stats.json not JSON": lambda root: (root / STATS).write_text("{ nope"),
    "task_index repeated": tasks_table([0, 0], ["pick the cube", "place the cube"]),
    "task_index as text": tasks_table(["0", "1"], ["pick the cube", "place the cube"]),
}


DATA = "data/chunk-000/file-000.parquet"
VIDEO = f"videos/{VIDEO_KEY}/chunk-000/file-000.mp4"


def data(change: Callable[[dict[str, list]], Any]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        columns = pq.read_table(root / DATA).to_pydict()
        change(columns)
        pq.write_table(pa.table(columns), root / DATA)

    return apply


def _set_cell(columns: dict[str, list], key: str, row: int, value: Any) -> None:
    columns[key][row] = value


# The reader's refusals past meta/: the check names them alike.
DATA_FAULTS = {
    "the data file missing": lambda root: (root / DATA).unlink(),
    "the video missing": lambda root: (root / VIDEO).unlink(),
    "a feature's column missing": data(lambda c: _popped(c, "action")),
    "two columns missing": data(lambda c: (_popped(c, "action"), _popped(c, "observation.state"))),
    "a task_index past the tasks": data(lambda c: _set_cell(c, "task_index", 30, 7)),
    "episode_index as text": data(
        lambda c: c.update(episode_index=[str(v) for v in c["episode_index"]])
    ),
    "an empty index": data(lambda c: _set_cell(c, "index", 3, None)),
    "a NaN timestamp": data(lambda c: _set_cell(c, "timestamp", 3, float("nan"))),
    "rows of an episode dropped": data(
        lambda c: [values.__delitem__(slice(0, 2)) for values in c.values()]
    ),
    "a feature of another shape": feature("action", shape=[5]),
}


@pytest.fixture
def sim_video(fixtures_dir: Path, tmp_path: Path) -> Path:
    return support.copy_dataset(fixtures_dir / "sim_video", tmp_path / "sim_video")


def outcome(root: Path) -> tuple[DatasetError | None, CheckReport]:
    try:
        read_all(root)
        refused = None
    except DatasetError as err:
        refused = err
    return refused, check(root)


@pytest.mark.parametrize("fault", sorted(ACCEPTED))
def test_what_lerobot_accepts_both_accept(sim_video, fault):
    ACCEPTED[fault](sim_video)
    refused, report = outcome(sim_video)
    assert refused is None, refused
    assert report.ok, report.errors


@pytest.mark.parametrize("fault", sorted(REFUSED))
def test_the_reader_refuses_what_check_reports_with_the_same_message(sim_video, fault):
    REFUSED[fault](sim_video)
    refused, report = outcome(sim_video)
    assert refused is not None, f"the reader read a dataset with {fault}"
    assert not report.ok
    same = [p for p in report.errors if p.message == refused.message]
    assert same, (refused, report.errors)
    assert same[0].file and same[0].file in refused.where
    assert refused.hint


@pytest.mark.parametrize("fault", sorted(ACCEPTED))
def test_resume_accepts_what_the_reader_accepts(sim_video, fault):
    ACCEPTED[fault](sim_video)
    with LeRobotV3Writer(options=support.writer.fast_options()).resume(sim_video):
        pass
    assert LeRobotMetaReader().read_meta(sim_video).total_episodes == 3


@pytest.mark.parametrize("fault", sorted(REFUSED))
def test_resume_refuses_with_the_readers_message(sim_video, fault):
    REFUSED[fault](sim_video)
    try:
        LeRobotMetaReader().read_meta(sim_video)
    except DatasetError as err:
        with pytest.raises(DatasetError) as caught:
            LeRobotV3Writer().resume(sim_video)
        assert caught.value.message == err.message
    else:
        pytest.skip("a fault of the data files, not of meta/: resume does not read them")


def test_fractional_size_limits_write_read_check_and_resume(tmp_path):
    # LeRobot users lower the limits to get many small files; 0.001 MB is one episode per file.
    root = tmp_path / "ds"
    plan = support.writer.DatasetPlan(
        fps=10, state_dim=2, episodes=(("a",) * 3, ("b",) * 4, ("a",) * 2), video=True
    )
    support.writer.write(root, plan, data_files_size_in_mb=0.001, video_files_size_in_mb=0.001)
    content = json.loads((root / INFO).read_text())
    assert (content["data_files_size_in_mb"], content["video_files_size_in_mb"]) == (0.001, 0.001)
    meta = LeRobotMetaReader().read_meta(root)
    assert meta.data_files_size_in_mb == 0.001
    assert len(list((root / "data").rglob("*.parquet"))) == 3
    assert len(list((root / "videos").rglob("*.mp4"))) == 3
    report = check(root)
    assert report.ok and not report.problems, report.problems
    session = LeRobotV3Writer(options=support.writer.fast_options()).resume(root)
    with session:
        for t in range(5):
            session.add_frame(support.writer.frame(plan, 0, t % 3))
        session.save_episode()
    reader = LeRobotDatasetReader(root, video_backend="pyav")
    assert (reader.num_episodes, len(reader)) == (4, 14)
    assert len(list((root / "data").rglob("*.parquet"))) == 4
    assert check(root).ok


def test_unknown_keys_survive_a_resume(sim_video):
    set_info(my_lab={"site": "Lyon"})(sim_video)
    drop_info("video_files_size_in_mb")(sim_video)
    with LeRobotV3Writer(options=support.writer.fast_options()).resume(sim_video):
        pass
    content = json.loads((sim_video / INFO).read_text())
    assert content["my_lab"] == {"site": "Lyon"}
    assert "video_files_size_in_mb" not in content


@pytest.mark.parametrize("fault", sorted(DATA_FAULTS))
def test_data_faults_the_reader_refuses_check_reports_with_the_same_message(sim_video, fault):
    DATA_FAULTS[fault](sim_video)
    refused, report = outcome(sim_video)
    assert refused is not None, f"the reader read a dataset with {fault}"
    same = [p for p in report.errors if p.message == refused.message]
    assert same, (refused, report.errors)
    assert same[0].file and same[0].file in refused.where
