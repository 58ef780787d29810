"""rlctl writes the files LeRobot 0.6.1 writes: same info.json, same columns, same Arrow types.

Each test records what the fixture under ../shared was recorded with (features, fps, episode
lengths, tasks) and compares the layouts file by file with LeRobot's own output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions

LENGTHS = {"sim_video": [20, 25, 30], "sim_images": [12, 15]}
TASKS = {
    "sim_video": ["pick the cube", "place the cube", "pick the cube"],
    "sim_images": ["pick"] * 2,
}


def _lerobot_tasks(fixture: Path) -> list[str]:
    table = pq.read_table(fixture / "meta/tasks.parquet").sort_by("task_index")
    return table.column("task").to_pylist()


def _record_like(fixture: Path, root: Path, name: str) -> None:
    info = json.loads((fixture / "meta/info.json").read_text())
    features = {
        key: {k: v for k, v in spec.items() if k != "info"}
        for key, spec in info["features"].items()
    }
    episode_tasks = [
        row["tasks"][0]
        for row in pq.read_table(
            fixture / "meta/episodes/chunk-000/file-000.parquet", columns=["tasks"]
        ).to_pylist()
    ]
    rng = np.random.default_rng(0)
    session = LeRobotV3Writer(options=WriterOptions(encode_in_subprocess=False)).create(
        root, fps=info["fps"], features=features, robot_type=info["robot_type"]
    )
    with session:
        for length, task in zip(LENGTHS[name], episode_tasks):
            for _ in range(length):
                frame: dict[str, Any] = {"task": task}
                for key, spec in features.items():
                    if key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
                        continue
                    if spec["dtype"] in ("image", "video"):
                        frame[key] = rng.integers(0, 256, spec["shape"], dtype=np.uint8)
                    else:
                        frame[key] = rng.standard_normal(spec["shape"]).astype(spec["dtype"])
                session.add_frame(frame)
            session.save_episode()


@pytest.fixture(params=["sim_video", "sim_images"])
def pair(request, fixtures_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    fixture = fixtures_dir / request.param
    _record_like(fixture, tmp_path / "ds", request.param)
    return fixture, tmp_path / "ds"


def _schema(path: Path) -> list[tuple[str, str]]:
    return [(field.name, str(field.type)) for field in pq.read_schema(path)]


def test_info_json_is_identical(pair) -> None:
    lerobot, ours = pair
    expected = json.loads((lerobot / "meta/info.json").read_text())
    written = json.loads((ours / "meta/info.json").read_text())
    assert list(written) == list(expected)
    assert written == expected


def test_data_files_have_lerobots_columns_and_features(pair) -> None:
    lerobot, ours = pair
    path = "data/chunk-000/file-000.parquet"
    assert _schema(ours / path) == _schema(lerobot / path)

    def hf_features(root: Path) -> dict:
        metadata = pq.read_schema(root / path).metadata
        return json.loads(metadata[b"huggingface"])["info"]["features"]

    assert hf_features(ours) == hf_features(lerobot)
    assert (
        pq.ParquetFile(ours / path).num_row_groups == pq.ParquetFile(lerobot / path).num_row_groups
    )


def test_episodes_metadata_has_every_lerobot_column(pair) -> None:
    lerobot, ours = pair
    path = "meta/episodes/chunk-000/file-000.parquet"
    assert _schema(ours / path) == _schema(lerobot / path)
    ours_rows = pq.read_table(ours / path).to_pylist()
    lerobot_rows = pq.read_table(lerobot / path).to_pylist()
    ignored_prefix = "stats/"  # the values depend on the random content
    for mine, theirs in zip(ours_rows, lerobot_rows, strict=True):
        same = {k: v for k, v in theirs.items() if not k.startswith(ignored_prefix)}
        assert {k: mine[k] for k in same} == same
        for key, value in theirs.items():
            if key.startswith(ignored_prefix):
                assert np.shape(mine[key]) == np.shape(value), key


def test_tasks_parquet_restores_lerobots_pandas_index(pair) -> None:
    lerobot, ours = pair
    assert _schema(ours / "meta/tasks.parquet") == _schema(lerobot / "meta/tasks.parquet")

    def pandas_layout(root: Path) -> tuple:
        meta = json.loads(pq.read_schema(root / "meta/tasks.parquet").metadata[b"pandas"])
        return meta["index_columns"], [(c["name"], c["pandas_type"]) for c in meta["columns"]]

    assert pandas_layout(ours) == pandas_layout(lerobot)
    assert _lerobot_tasks(ours) == _lerobot_tasks(lerobot)


def test_stats_json_has_the_same_keys_and_shapes(pair) -> None:
    lerobot, ours = pair
    expected = json.loads((lerobot / "meta/stats.json").read_text())
    written = json.loads((ours / "meta/stats.json").read_text())
    assert set(written) == set(expected)
    for key, stats in expected.items():
        assert list(written[key]) == list(stats), key
        for stat, value in stats.items():
            assert np.shape(written[key][stat]) == np.shape(value), (key, stat)
    assert written["index"]["count"] == expected["index"]["count"]
