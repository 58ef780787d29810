"""Episodes of a v3.0 dataset as the rebuilder reads them: rows, video spans, statistics.

`V3Source` hands out the version-neutral `SourceEpisode` (`rlctl.adapters.storage.episode_source`),
as the v2.x reader does, so merging, splitting, deleting and converting are one rebuild.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from rlctl.adapters.storage.episode_source import SourceEpisode, VideoSpan, dataset_root
from rlctl.adapters.storage.lerobot_v3.errors import (
    CORRUPT_HINT,
    check_hint,
    read_parquet_table,
)
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.paths import (
    episode_data_file,
    episode_video_file,
    episode_video_span,
)
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import CorruptDataset, InvalidInput
from rlctl.domain.statistics import FeatureStats


def stats_from_columns(columns: Mapping[str, Any], where: str) -> dict[str, FeatureStats]:
    """Per-feature statistics from `stats/<key>/<stat>` columns (LeRobot's episodes layout)."""
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in columns.items():
        if not name.startswith("stats/") or value is None:
            continue
        key, _, stat = name[len("stats/") :].rpartition("/")
        grouped.setdefault(key, {})[stat] = value
    stats = {}
    for key, entry in grouped.items():
        if not {"min", "max", "mean", "std"} <= set(entry):
            continue
        try:
            stats[key] = FeatureStats.from_json(entry, where=f"{where}: stats/{key}")
        except InvalidInput as err:
            raise CorruptDataset(err.message, where=err.where, hint=CORRUPT_HINT) from err
    return stats


def episode_rows(path: Path, root: Path, index: int, length: int) -> pa.Table:
    """The rows of episode `index` in a data file (row groups of other episodes are skipped)."""
    table = read_parquet_table(path, "data file", root, filters=[("episode_index", "=", index)])
    if table.num_rows != length:
        raise CorruptDataset(
            f"episode {index} should have {length} rows but the data file holds {table.num_rows}",
            where=f"{path}: episode {index}",
            hint=check_hint(root, "run `rlctl dataset check ROOT` to list every problem"),
        )
    return table


class V3Source:
    """`EpisodeSource` over a LeRobot v3.0 folder."""

    def __init__(self, root: Path, meta: DatasetMeta | None = None) -> None:
        self._root = dataset_root(root)
        self._meta = meta if meta is not None else LeRobotMetaReader().read_meta(self._root)

    @property
    def root(self) -> Path:
        return self._root

    @property
    def meta(self) -> DatasetMeta:
        return self._meta

    def _record(self, index: int) -> EpisodeRecord:
        if not 0 <= index < self._meta.total_episodes:
            raise InvalidInput(
                f"episode {index} does not exist: the dataset has {self._meta.total_episodes}",
                where=str(self._root),
            )
        return self._meta.episodes[index]

    def episode(self, index: int) -> SourceEpisode:
        record = self._record(index)
        videos = {}
        for key in self._meta.video_keys:
            start, end = episode_video_span(record, key)
            path = self._root / episode_video_file(self._meta, record, key)
            videos[key] = VideoSpan(path, start, end)
        return SourceEpisode(
            index=index,
            length=record.length,
            tasks=record.tasks,
            stats=stats_from_columns(record.columns, f"{self._root}/meta/episodes"),
            videos=videos,
            data_file=self._root / episode_data_file(self._meta, record),
        )

    def rows(self, index: int) -> pa.Table:
        record = self._record(index)
        path = self._root / episode_data_file(self._meta, record)
        return episode_rows(path, self._root, index, record.length)
