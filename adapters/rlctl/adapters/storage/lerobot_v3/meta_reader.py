"""Reading a LeRobot v3.0 dataset's `meta/` folder into a `DatasetMeta`.

`meta/info.json` (schema, fps, totals, path templates), `meta/tasks.parquet` (task strings by
`task_index`), `meta/episodes/chunk-*/file-*.parquet` (one row per episode: its rows, files, video
spans and per-episode stats; every column is kept in `EpisodeRecord.columns`) and
`meta/stats.json`. Every failure becomes a `DatasetError` naming the file and key.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import structlog

from rlctl.adapters.storage.lerobot_v3.errors import (
    CORRUPT_HINT,
    INCOMPLETE_HINT,
    check_hint,
    read_json,
    read_parquet_table,
)
from rlctl.adapters.storage.lerobot_v3.paths import (
    DEFAULT_DATA_PATH,
    EPISODES_DIR,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
)
from rlctl.domain.dataset_meta import CODEBASE_VERSION, DatasetMeta, EpisodeRecord
from rlctl.domain.errors import (
    CorruptDataset,
    DatasetNotFound,
    DatasetVersionError,
    InvalidInput,
)
from rlctl.domain.features import features_from_info

log = structlog.get_logger()

SUPPORTED_MAJOR = 3
_VERSION = re.compile(r"^v?(\d+)\.(\d+)")
# Columns every episodes row must have: the reader cannot place an episode without them.
REQUIRED_EPISODE_COLUMNS = ("episode_index", "length", "dataset_from_index", "dataset_to_index")


def parse_version(version: object, where: str) -> tuple[int, int]:
    match = _VERSION.match(str(version)) if isinstance(version, str) else None
    if match is None:
        raise CorruptDataset(
            f"codebase_version {version!r} is not a version like 'v3.0'",
            where=where,
            hint="set codebase_version to the LeRobot format version of the files, e.g. 'v3.0'",
        )
    return int(match.group(1)), int(match.group(2))


def check_codebase_version(version: object, root: Path) -> None:
    """v3.x reads; v2.x needs converting; anything newer than v3 needs a newer rlctl."""
    where = f"{root / INFO_PATH}: codebase_version"
    major, minor = parse_version(version, where)
    if major < SUPPORTED_MAJOR:
        raise DatasetVersionError(
            f"the dataset is in LeRobot format {version}; rlctl reads {CODEBASE_VERSION}",
            where=where,
            hint=f"convert it once: rlctl dataset convert {root}",
        )
    if major > SUPPORTED_MAJOR:
        raise DatasetVersionError(
            f"the dataset is in LeRobot format {version}, newer than this rlctl reads "
            f"({CODEBASE_VERSION})",
            where=where,
            hint="upgrade rlctl (pip install -U rlctl), or rewrite the dataset in v3.0",
        )
    if minor > int(CODEBASE_VERSION.split(".")[1]):
        # Minor versions add keys; LeRobot reads them too, so read and say so.
        log.warning("dataset is a newer minor format version", version=version, root=str(root))


class LeRobotMetaReader:
    """`DatasetMetaReader` for LeRobot v3.0 folders on the local disk."""

    def read_meta(self, location: str | Path) -> DatasetMeta:
        root = dataset_root(location)
        info = read_info(root)
        features = _features(info, root)
        tasks = read_tasks(root, expected=_int(info, "total_tasks", root, default=None))
        total_episodes = _int(info, "total_episodes", root)
        episodes = read_episodes(root) if total_episodes > 0 else ()
        episodes = drop_uncommitted(episodes, total_episodes, root)
        meta = DatasetMeta(
            codebase_version=str(info["codebase_version"]),
            fps=_int(info, "fps", root),
            features=features,
            total_episodes=total_episodes,
            total_frames=_int(info, "total_frames", root),
            tasks=tasks,
            episodes=episodes,
            robot_type=info.get("robot_type"),
            chunks_size=_int(info, "chunks_size", root, default=1000),
            data_files_size_in_mb=_int(info, "data_files_size_in_mb", root, default=100),
            video_files_size_in_mb=_int(info, "video_files_size_in_mb", root, default=200),
            data_path=str(info.get("data_path") or DEFAULT_DATA_PATH),
            video_path=info.get("video_path"),
            stats=read_stats(root),
            info=info,
        )
        check_totals(meta, root)
        return meta

    def size_on_disk(self, location: str | Path) -> int:
        root = dataset_root(location)
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def dataset_root(location: str | Path) -> Path:
    root = Path(location).expanduser()
    if not root.is_dir():
        raise DatasetNotFound(
            "no dataset folder here",
            where=str(root),
            hint="give the dataset's root folder (the one holding meta/ and data/)",
        )
    return root


def read_info(root: Path) -> dict[str, Any]:
    path = root / INFO_PATH
    if not path.exists():
        legacy = (root / "meta" / "episodes.jsonl").exists()
        raise DatasetNotFound(
            "no meta/info.json: this folder is not a LeRobot dataset",
            where=str(path),
            hint=(
                "this looks like a partly copied dataset; copy meta/info.json too"
                if legacy or (root / "data").is_dir()
                else "give the dataset's root folder (the one holding meta/ and data/)"
            ),
        )
    info = read_json(path, "dataset info file", root)
    if not isinstance(info, dict):
        raise CorruptDataset(
            f"info.json must hold a JSON object, found {type(info).__name__}",
            where=str(path),
            hint=check_hint(root, CORRUPT_HINT),
        )
    if "codebase_version" not in info:
        raise CorruptDataset(
            "info.json has no codebase_version",
            where=f"{path}: codebase_version",
            hint='add "codebase_version": "v3.0" if the files are in LeRobot\'s v3.0 layout',
        )
    check_codebase_version(info["codebase_version"], root)
    return info


_REQUIRED = object()


def _int(info: Mapping[str, Any], key: str, root: Path, default: Any = _REQUIRED) -> Any:
    """A whole-number key of info.json; `default` when absent, unless the key is required."""
    if key not in info or info[key] is None:
        if default is _REQUIRED:
            raise CorruptDataset(
                f"info.json has no {key!r}",
                where=f"{root / INFO_PATH}: {key}",
                hint="restore info.json from the original dataset",
            )
        return default
    value = info[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise CorruptDataset(
            f"{key} must be a whole number, found {value!r}",
            where=f"{root / INFO_PATH}: {key}",
            hint="restore info.json from the original dataset",
        )
    return int(value)


def _features(info: Mapping[str, Any], root: Path) -> dict[str, Any]:
    if "features" not in info:
        raise CorruptDataset(
            "info.json has no 'features'",
            where=f"{root / INFO_PATH}: features",
            hint="restore info.json from the original dataset",
        )
    try:
        return features_from_info(info["features"])
    except InvalidInput as err:
        raise CorruptDataset(
            err.message, where=f"{root / INFO_PATH}: {err.where}", hint=err.hint
        ) from err


def read_tasks(root: Path, expected: int | None = None) -> tuple[str, ...]:
    """Task strings in `task_index` order (pandas wrote them as the index: `task` column)."""
    path = root / TASKS_PATH
    if not path.exists() and not expected:
        return ()
    table = read_parquet_table(path, "tasks file", root)
    task_column = next(
        (name for name in ("task", "__index_level_0__") if name in table.column_names), None
    )
    if task_column is None or "task_index" not in table.column_names:
        raise CorruptDataset(
            f"tasks.parquet needs a 'task' and a 'task_index' column, found {table.column_names}",
            where=str(path),
            hint=check_hint(root, CORRUPT_HINT),
        )
    tasks = [str(t) for t in table.column(task_column).to_pylist()]
    indices = table.column("task_index").to_pylist()
    if sorted(indices) != list(range(len(indices))):
        raise CorruptDataset(
            f"task_index must number the tasks 0..{len(indices) - 1}, found {indices}",
            where=f"{path}: task_index",
            hint=check_hint(root, CORRUPT_HINT),
        )
    by_index = dict(zip(indices, tasks))
    return tuple(by_index[i] for i in range(len(indices)))


def episode_files(root: Path) -> list[Path]:
    """The episodes parquet files in LeRobot's order (sorted chunk, then file)."""
    return sorted((root / EPISODES_DIR).glob("*/*.parquet"))


def read_episodes(root: Path) -> tuple[EpisodeRecord, ...]:
    files = episode_files(root)
    if not files:
        raise CorruptDataset(
            "info.json counts episodes but meta/episodes holds no parquet file",
            where=str(root / EPISODES_DIR),
            hint=check_hint(root, INCOMPLETE_HINT),
        )
    records: list[EpisodeRecord] = []
    for path in files:
        records.extend(_records(read_parquet_table(path, "episodes metadata file", root), path))
    _check_numbering(records, root)
    return tuple(records)


def _records(table: pa.Table, path: Path) -> list[EpisodeRecord]:
    missing = [c for c in REQUIRED_EPISODE_COLUMNS if c not in table.column_names]
    if missing:
        raise CorruptDataset(
            f"the episodes metadata lacks the column(s) {', '.join(missing)}",
            where=str(path),
            hint="rewrite the episodes metadata with LeRobot or rlctl",
        )
    # Column-wise conversion: much faster than row by row on thousands of episodes.
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    records = []
    for row in range(table.num_rows):
        values = {name: column[row] for name, column in columns.items()}
        record = EpisodeRecord(
            index=int(values["episode_index"]),
            length=int(values["length"]),
            tasks=tuple(values.get("tasks") or ()),
            dataset_from_index=int(values["dataset_from_index"]),
            dataset_to_index=int(values["dataset_to_index"]),
            columns=values,
        )
        if record.dataset_to_index - record.dataset_from_index != record.length:
            raise CorruptDataset(
                f"episode {record.index} has length {record.length} but rows "
                f"[{record.dataset_from_index}, {record.dataset_to_index})",
                where=f"{path}: episode {record.index}",
                hint="length must equal dataset_to_index - dataset_from_index; "
                "rewrite the episodes metadata",
            )
        records.append(record)
    return records


def _check_numbering(records: list[EpisodeRecord], root: Path) -> None:
    # LeRobot finds an episode's row by its position, so episode_index must be 0..N-1 in order.
    for position, record in enumerate(records):
        if record.index != position:
            raise CorruptDataset(
                f"episode rows must be numbered 0..{len(records) - 1} in order; row {position} "
                f"is episode {record.index}",
                where=f"{root / EPISODES_DIR}: episode_index",
                hint=check_hint(root, CORRUPT_HINT),
            )
    for before, after in itertools.pairwise(records):
        if after.dataset_from_index != before.dataset_to_index:
            raise CorruptDataset(
                f"episode {after.index} starts at row {after.dataset_from_index} but episode "
                f"{before.index} ends at row {before.dataset_to_index}",
                where=f"{root / EPISODES_DIR}: dataset_from_index",
                hint=check_hint(root, CORRUPT_HINT),
            )


def drop_uncommitted(
    episodes: tuple[EpisodeRecord, ...], total_episodes: int, root: Path
) -> tuple[EpisodeRecord, ...]:
    """The episodes info.json counts; rows after them are an unfinished commit, ignored.

    The writer renames meta/episodes before info.json, so a kill between the two renames leaves
    rows past `total_episodes`: the episode was not committed, and `resume` removes it.
    """
    if len(episodes) <= total_episodes:
        return episodes
    log.warning(
        "meta/episodes holds rows past info.json's total_episodes (an interrupted commit); "
        "ignoring them",
        root=str(root),
        total_episodes=total_episodes,
        ignored=[e.index for e in episodes[total_episodes:]],
    )
    return episodes[:total_episodes]


def check_totals(meta: DatasetMeta, root: Path) -> None:
    """info.json's totals must agree with meta/episodes: the reader trusts both."""
    if len(meta.episodes) != meta.total_episodes:
        raise CorruptDataset(
            f"info.json says {meta.total_episodes} episodes but meta/episodes lists "
            f"{len(meta.episodes)}",
            where=f"{root / INFO_PATH}: total_episodes",
            hint=check_hint(root, CORRUPT_HINT),
        )
    frames = sum(e.length for e in meta.episodes)
    if frames != meta.total_frames:
        raise CorruptDataset(
            f"info.json says {meta.total_frames} frames but the episodes add up to {frames}",
            where=f"{root / INFO_PATH}: total_frames",
            hint=check_hint(root, CORRUPT_HINT),
        )


def read_stats(root: Path) -> dict[str, dict[str, np.ndarray]] | None:
    """`meta/stats.json` with every statistic as a numpy array (as LeRobot loads it), or None."""
    path = root / STATS_PATH
    if not path.exists():
        return None
    raw = read_json(path, "statistics file", root)
    if not isinstance(raw, dict):
        raise CorruptDataset(
            "stats.json must hold a JSON object of feature -> statistics",
            where=str(path),
            hint="recompute it: rlctl dataset recompute-stats " + str(root),
        )
    stats: dict[str, dict[str, np.ndarray]] = {}
    for key, entry in raw.items():
        if not isinstance(entry, dict):
            raise CorruptDataset(
                f"statistics of {key!r} must be an object of name -> values",
                where=f"{path}: {key}",
                hint="recompute it: rlctl dataset recompute-stats " + str(root),
            )
        stats[key] = {name: np.asarray(value) for name, value in entry.items()}
    return stats
