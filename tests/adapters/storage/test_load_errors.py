"""A fault corpus: copies of LeRobot's fixtures, each broken one way, and the error each one gives.

Every case asserts the exact error class and that the message names the file (or key) at fault,
so a user never has to read a pyarrow or ffmpeg traceback to know what to fix.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.domain.errors import (
    CorruptDataset,
    DatasetError,
    DatasetNotFound,
    DatasetVersionError,
    RlctlError,
)

INFO = "meta/info.json"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
DATA = "data/chunk-000/file-000.parquet"
VIDEO = "videos/observation.images.front/chunk-000/file-000.mp4"


def copy_fixture(fixtures_dir: Path, name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(fixtures_dir / name, root)
    for path in [root, *root.rglob("*")]:  # the shared fixtures are read-only
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return root


def edit_info(root: Path, change: Callable[[dict], None]) -> None:
    info = json.loads((root / INFO).read_text())
    change(info)
    (root / INFO).write_text(json.dumps(info, indent=4))


def edit_parquet(path: Path, change: Callable[[dict], None]) -> None:
    table = pq.read_table(path)
    columns = table.to_pydict()
    change(columns)
    pq.write_table(pa.table(columns, schema=table.schema), path)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def open_and_read(root: Path, backend: str = "pyav") -> None:
    reader = LeRobotDatasetReader(root, video_backend=backend)
    reader.get_items(range(len(reader)))


@pytest.fixture
def sim_video(fixtures_dir: Path, tmp_path: Path) -> Path:
    return copy_fixture(fixtures_dir, "sim_video", tmp_path)


def assert_names(error: RlctlError, *parts: str) -> None:
    text = str(error)
    for part in parts:
        assert part in text, f"{part!r} not in {text!r}"
    assert error.hint, "every loading error says what to do"


def test_no_folder_is_not_found(tmp_path):
    with pytest.raises(DatasetNotFound) as caught:
        LeRobotDatasetReader(tmp_path / "nowhere")
    assert_names(caught.value, "nowhere")


def test_missing_info_json_is_not_found(sim_video):
    (sim_video / INFO).unlink()
    with pytest.raises(DatasetNotFound) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "info.json")


def test_bad_json_in_info_names_file_and_line(sim_video):
    (sim_video / INFO).write_text('{"codebase_version": "v3.0", "fps": 10,,}')
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "info.json", "line 1")


def test_info_without_a_required_key_names_it(sim_video):
    edit_info(sim_video, lambda info: info.pop("fps"))
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "info.json", "fps")


def test_v21_dataset_asks_for_conversion(sim_video):
    edit_info(sim_video, lambda info: info.update(codebase_version="v2.1"))
    with pytest.raises(DatasetVersionError) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "info.json", "v2.1")
    assert f"rlctl dataset convert {sim_video}" in caught.value.hint


def test_newer_dataset_asks_for_an_upgrade(sim_video):
    edit_info(sim_video, lambda info: info.update(codebase_version="v9.0"))
    with pytest.raises(DatasetVersionError) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "info.json", "v9.0")
    assert "upgrade" in caught.value.hint


def test_truncated_data_parquet_names_the_file(sim_video):
    truncate(sim_video / DATA)
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, DATA)


def test_truncated_episodes_metadata_names_the_file(sim_video):
    truncate(sim_video / EPISODES)
    with pytest.raises(CorruptDataset) as caught:
        LeRobotMetaReader().read_meta(sim_video)
    assert_names(caught.value, EPISODES)


def test_missing_episodes_metadata_is_an_incomplete_copy(sim_video):
    shutil.rmtree(sim_video / "meta/episodes")
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "meta/episodes")


def test_truncated_tasks_names_the_file(sim_video):
    truncate(sim_video / "meta/tasks.parquet")
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "tasks.parquet")


def test_bad_stats_json_names_the_file(sim_video):
    (sim_video / "meta/stats.json").write_text("{not json")
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "stats.json")


def test_missing_mp4_is_an_incomplete_copy_named_at_open(sim_video):
    (sim_video / VIDEO).unlink()
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, VIDEO)
    assert "incomplete" in caught.value.hint


def test_missing_data_file_is_an_incomplete_copy(sim_video):
    (sim_video / DATA).unlink()
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, DATA)


@pytest.mark.parametrize("backend", ["pyav", pytest.param("torchcodec", marks=pytest.mark.slow)])
def test_corrupt_mp4_names_the_file_when_read(sim_video, backend):
    (sim_video / VIDEO).write_bytes(b"\x00\x00\x00\x18ftypisom" + b"\x13" * 4000)
    try:
        reader = LeRobotDatasetReader(sim_video, video_backend=backend)
    except RlctlError as err:
        if "torchcodec" in str(err) and backend == "torchcodec":
            pytest.skip("torchcodec cannot run here")
        raise
    with pytest.raises(CorruptDataset) as caught:
        reader[0]
    assert_names(caught.value, VIDEO)


def test_feature_without_data_column_names_file_and_key(sim_video):
    edit_info(
        sim_video,
        lambda info: info["features"].update(
            {"observation.velocity": {"dtype": "float32", "shape": [6], "names": None}}
        ),
    )
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, DATA, "observation.velocity")


def test_episodes_whose_indices_do_not_match_the_data(sim_video):
    def shift_boundary(columns: dict) -> None:
        # Episode 1 one frame shorter, episode 2 one longer: metadata stays self-consistent.
        columns["length"] = [20, 24, 31]
        columns["dataset_to_index"] = [20, 44, 75]
        columns["dataset_from_index"] = [0, 20, 44]

    edit_parquet(sim_video / EPISODES, shift_boundary)
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, DATA, "episode 1")


def test_episode_length_disagreeing_with_its_rows(sim_video):
    edit_parquet(sim_video / EPISODES, lambda columns: columns.update(length=[20, 26, 30]))
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, EPISODES, "episode 1")


def test_totals_disagreeing_with_episodes(sim_video):
    edit_info(sim_video, lambda info: info.update(total_frames=80))
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, "info.json", "total_frames")


def test_feature_shape_disagreeing_with_the_data(sim_video):
    edit_info(sim_video, lambda info: info["features"]["action"].update(shape=[7]))
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, DATA, "action")


def test_task_index_beyond_the_tasks(sim_video):
    edit_parquet(
        sim_video / "meta/tasks.parquet",
        lambda columns: columns.update(task_index=[0], task=["pick the cube"]),
    )
    with pytest.raises(CorruptDataset) as caught:
        LeRobotDatasetReader(sim_video)
    assert_names(caught.value, DATA, "task_index")


def test_every_loading_error_is_a_dataset_error(sim_video):
    truncate(sim_video / DATA)
    with pytest.raises(DatasetError):
        LeRobotDatasetReader(sim_video)
