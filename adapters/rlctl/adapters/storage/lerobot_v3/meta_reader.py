"""Reading a LeRobot v3.0 dataset's `meta/` folder into a `DatasetMeta`.

`meta/info.json` (schema, fps, totals, path templates), `meta/tasks.parquet` (task strings by
`task_index`), `meta/episodes/chunk-*/file-*.parquet` (one row per episode: its rows, files, video
spans and per-episode stats; every column is kept in `EpisodeRecord.columns`) and
`meta/stats.json`. The rules are `meta_rules.py`'s, the same `rlctl dataset check` applies: the
first fault stops the read as a `DatasetError` naming the file and key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlctl.adapters.storage.episode_source import dataset_root, parse_version
from rlctl.adapters.storage.lerobot_v3.meta_rules import (
    REQUIRED_EPISODE_COLUMNS,
    Refuse,
    episode_files,
    load_meta,
    read_stats,
    read_tasks,
)
from rlctl.adapters.storage.lerobot_v3.meta_rules import read_info as _read_info
from rlctl.domain.dataset_meta import DatasetMeta

__all__ = [
    "REQUIRED_EPISODE_COLUMNS",
    "LeRobotMetaReader",
    "dataset_root",
    "episode_files",
    "parse_version",
    "read_info",
    "read_stats",
    "read_tasks",
]


class LeRobotMetaReader:
    """`DatasetMetaReader` for LeRobot v3.0 folders on the local disk."""

    def read_meta(self, location: str | Path) -> DatasetMeta:
        root = dataset_root(location)
        meta = load_meta(root, Refuse(root))
        assert meta is not None  # Refuse raises on every error
        return meta

    def size_on_disk(self, location: str | Path) -> int:
        root = dataset_root(location)
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def read_info(root: Path) -> dict[str, Any]:
    """info.json as a JSON object of a version rlctl reads (raises otherwise)."""
    info = _read_info(root, Refuse(root))
    assert info is not None
    return info
