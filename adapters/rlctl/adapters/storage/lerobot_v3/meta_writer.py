"""Writing LeRobot v3.0's `meta/` folder: info.json, tasks.parquet, stats.json, episodes/*.parquet.

The layouts follow what LeRobot 0.6.1 writes (see `../shared/fixtures/lerobot-0.6.1`): the same
keys in the same order, the same column names and Arrow types. Every file is replaced atomically;
the writer replaces `meta/info.json` last, which makes it the commit point of an episode.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from rlctl.adapters.storage.lerobot_v3.atomic_files import StagedReplace, write_json_atomic
from rlctl.adapters.storage.lerobot_v3.paths import (
    EPISODES_PATH,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
)
from rlctl.domain.dataset_meta import CODEBASE_VERSION
from rlctl.domain.features import FeatureSpec, features_to_info
from rlctl.domain.statistics import FeatureStats, stats_to_json

STAT_KEYS = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")
# pandas rebuilds tasks.parquet's "task" index from this block; LeRobot looks tasks up by it.
_PANDAS_VERSION = "2.3.3"


# --- info.json ---------------------------------------------------------------------------------


def new_info(
    *,
    fps: int,
    features: Mapping[str, FeatureSpec],
    robot_type: str | None,
    chunks_size: int,
    data_files_size_in_mb: float,
    video_files_size_in_mb: float,
    data_path: str,
    video_path: str | None,
) -> dict[str, Any]:
    """An info.json for an empty dataset, with LeRobot's keys in LeRobot's order."""
    return {
        "codebase_version": CODEBASE_VERSION,
        "fps": fps,
        "features": features_to_info(features),
        "total_episodes": 0,
        "total_frames": 0,
        "total_tasks": 0,
        "chunks_size": chunks_size,
        "data_files_size_in_mb": data_files_size_in_mb,
        "video_files_size_in_mb": video_files_size_in_mb,
        "data_path": data_path,
        "video_path": video_path,
        "robot_type": robot_type,
        "splits": {},
    }


def with_totals(
    info: Mapping[str, Any], *, episodes: int, frames: int, tasks: int
) -> dict[str, Any]:
    """`info` with new totals; every other key, known or not, is kept as it was."""
    out = dict(info)
    out["total_episodes"] = episodes
    out["total_frames"] = frames
    out["total_tasks"] = tasks
    out["splits"] = {**dict(info.get("splits") or {}), "train": f"0:{episodes}"}
    return out


def write_info(root: Path, info: Mapping[str, Any], durable: bool = True) -> None:
    write_json_atomic(root / INFO_PATH, info, durable)


def stage_info(staged: StagedReplace, root: Path, info: Mapping[str, Any]) -> None:
    staged.stage_json(root / INFO_PATH, info)


def stage_stats(staged: StagedReplace, root: Path, stats: Mapping[str, FeatureStats]) -> None:
    staged.stage_json(root / STATS_PATH, stats_to_json(stats))


# --- tasks.parquet -----------------------------------------------------------------------------


def _tasks_schema() -> pa.Schema:
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": _PANDAS_VERSION,
    }
    return pa.schema(
        [("task_index", pa.int64()), ("task", pa.string())],
        metadata={"pandas": json.dumps(pandas_meta)},
    )


def stage_tasks(staged: StagedReplace, root: Path, tasks: Sequence[str]) -> None:
    """tasks.parquet: `task_index` and `task` (pandas' index), as LeRobot writes it."""
    table = pa.table(
        {
            "task_index": pa.array(range(len(tasks)), pa.int64()),
            "task": pa.array(tasks, pa.string()),
        },
        schema=_tasks_schema(),
    )
    staged.stage(root / TASKS_PATH, lambda temp: pq.write_table(table, temp))


# --- meta/episodes -----------------------------------------------------------------------------


@attrs.frozen
class VideoPlacement:
    """Where one camera's frames of an episode went: file and span inside it."""

    chunk_index: int
    file_index: int
    from_timestamp: float
    to_timestamp: float


@attrs.frozen
class EpisodeEntry:
    """Everything of one row of `meta/episodes`, before it becomes Arrow."""

    episode_index: int
    tasks: tuple[str, ...]
    length: int
    data_chunk_index: int
    data_file_index: int
    dataset_from_index: int
    dataset_to_index: int
    videos: Mapping[str, VideoPlacement]
    stats: Mapping[str, FeatureStats]

    def row(
        self, *, with_stats: bool = True, meta_file: tuple[int, int] | None = None
    ) -> dict[str, Any]:
        """The episode's row of `meta/episodes`, column for column as LeRobot names them: the
        one place it is built (the writer, the rebuilder, the record a commit returns).
        `meta_file`: the (chunk, file) of the episodes file the row goes to."""
        row: dict[str, Any] = {
            "episode_index": self.episode_index,
            "tasks": list(self.tasks),
            "length": self.length,
            "data/chunk_index": self.data_chunk_index,
            "data/file_index": self.data_file_index,
            "dataset_from_index": self.dataset_from_index,
            "dataset_to_index": self.dataset_to_index,
        }
        for key, placement in self.videos.items():
            row[f"videos/{key}/chunk_index"] = placement.chunk_index
            row[f"videos/{key}/file_index"] = placement.file_index
            row[f"videos/{key}/from_timestamp"] = placement.from_timestamp
            row[f"videos/{key}/to_timestamp"] = placement.to_timestamp
        if with_stats:
            row.update(stats_columns(self.stats))
        if meta_file is not None:
            row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = meta_file
        return row


def stats_columns(stats: Mapping[str, FeatureStats]) -> dict[str, Any]:
    """`stats/<key>/<stat>` columns of per-episode statistics (LeRobot's names, its stats)."""
    columns: dict[str, Any] = {}
    for key, feature in stats.items():
        for stat, value in feature.to_json().items():
            if stat in STAT_KEYS:
                columns[f"stats/{key}/{stat}"] = value
    return columns


def _nested_float_list(depth: int) -> pa.DataType:
    kind: pa.DataType = pa.float64()
    for _ in range(depth):
        kind = pa.list_(kind)
    return kind


class EpisodesSchema:
    """The Arrow schema of `meta/episodes` for one dataset's video keys and statistics."""

    def __init__(
        self, video_keys: Sequence[str], stats_shapes: Mapping[str, tuple[int, ...]]
    ) -> None:
        self.video_keys = tuple(video_keys)
        self.stats_shapes = dict(stats_shapes)
        fields: list[tuple[str, pa.DataType]] = [
            ("episode_index", pa.int64()),
            ("tasks", pa.list_(pa.string())),
            ("length", pa.int64()),
            ("data/chunk_index", pa.int64()),
            ("data/file_index", pa.int64()),
            ("dataset_from_index", pa.int64()),
            ("dataset_to_index", pa.int64()),
        ]
        for key in self.video_keys:
            fields += [
                (f"videos/{key}/chunk_index", pa.int64()),
                (f"videos/{key}/file_index", pa.int64()),
                (f"videos/{key}/from_timestamp", pa.float64()),
                (f"videos/{key}/to_timestamp", pa.float64()),
            ]
        for key, shape in self.stats_shapes.items():
            for stat in STAT_KEYS:
                kind = pa.list_(pa.int64()) if stat == "count" else _nested_float_list(len(shape))
                fields.append((f"stats/{key}/{stat}", kind))
        fields += [
            ("meta/episodes/chunk_index", pa.int64()),
            ("meta/episodes/file_index", pa.int64()),
        ]
        self.arrow = pa.schema(fields)

    def row(self, entry: EpisodeEntry, meta_chunk_index: int, meta_file_index: int) -> pa.Table:
        values = entry.row(meta_file=(meta_chunk_index, meta_file_index))
        return pa.Table.from_pylist([values], schema=self.arrow)


def next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The file after (chunk, file): a new chunk folder once one holds `chunks_size` files."""
    if file_index + 1 >= chunks_size:
        return chunk_index + 1, 0
    return chunk_index, file_index + 1


class EpisodesMetaWriter:
    """Appends rows to `meta/episodes/chunk-XXX/file-YYY.parquet`, one atomic rewrite per episode.

    The rows of the file being filled stay in memory (a few kB each), so a rewrite never reads the
    disk. A new file starts past `max_file_mb`, or when the session begins after `resume`.
    """

    def __init__(
        self,
        root: Path,
        schema: EpisodesSchema,
        *,
        chunks_size: int,
        max_file_mb: float,
        last_file: tuple[int, int] | None = None,
    ) -> None:
        self._root = root
        self._schema = schema
        self._chunks_size = chunks_size
        self._max_file_bytes = max_file_mb * 1024 * 1024
        self._last_file = last_file
        self._current: tuple[int, int] | None = None
        self._rows: list[pa.Table] = []

    def _path(self, chunk_index: int, file_index: int) -> Path:
        return self._root / EPISODES_PATH.format(chunk_index=chunk_index, file_index=file_index)

    def _file_for_next_row(self) -> tuple[int, int]:
        if self._current is None:
            start = (
                (0, 0)
                if self._last_file is None
                else next_file(*self._last_file, self._chunks_size)
            )
            return start
        path = self._path(*self._current)
        size = path.stat().st_size if path.exists() else 0
        per_row = size / len(self._rows) if self._rows else 0
        if self._rows and size + per_row >= self._max_file_bytes:
            return next_file(*self._current, self._chunks_size)
        return self._current

    def stage(self, staged: StagedReplace, entry: EpisodeEntry) -> tuple[int, int]:
        """Stage the current (or a new) file with `entry` appended; returns its (chunk, file)."""
        target = self._file_for_next_row()
        if target != self._current:
            if self._current is not None:
                self._last_file = self._current
            self._current, self._rows = target, []
        row = self._schema.row(entry, *target)
        table = pa.concat_tables([*self._rows, row])
        staged.stage(
            self._path(*target), lambda temp: pq.write_table(table, temp, compression="snappy")
        )
        self._rows.append(row)
        return target


def stats_shapes(
    features: Mapping[str, FeatureSpec],
) -> dict[str, tuple[int, ...]]:
    """The shape of each feature's statistics, in feature order; strings have none."""
    shapes: dict[str, tuple[int, ...]] = {}
    for key, spec in features.items():
        if spec.is_string or spec.is_language:
            continue
        if spec.is_visual:
            shapes[key] = (spec.hwc[2], 1, 1)
        elif len(spec.shape) >= 2:
            # LeRobot reduces a numeric feature of rank >= 2 to its last axis.
            shapes[key] = spec.shape[-1:]
        else:
            shapes[key] = spec.shape if len(spec.shape) else (1,)
    return shapes
