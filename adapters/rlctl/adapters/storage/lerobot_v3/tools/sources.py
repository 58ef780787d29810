"""Episodes of an existing dataset as the rebuilder reads them: rows, video spans, statistics.

`open_source` picks the reader by `codebase_version`: v3.0 folders here, v2.x through
`rlctl.adapters.storage.lerobot_v21`. Both hand out the same `SourceEpisode`, so merging,
splitting, deleting and converting are one rebuild.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs
import pyarrow as pa

from rlctl.adapters.storage.lerobot_v3.errors import (
    CORRUPT_HINT,
    check_hint,
    read_json,
    read_parquet_table,
)
from rlctl.adapters.storage.lerobot_v3.meta_reader import (
    LeRobotMetaReader,
    dataset_root,
    parse_version,
)
from rlctl.adapters.storage.lerobot_v3.paths import (
    INFO_PATH,
    episode_data_file,
    episode_video_file,
    episode_video_span,
)
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import CorruptDataset, InvalidInput
from rlctl.domain.statistics import FeatureStats


@attrs.frozen
class VideoSpan:
    """Where an episode's frames of one camera are: a file and a span of it, in seconds."""

    path: Path
    from_timestamp: float
    to_timestamp: float

    @property
    def duration(self) -> float:
        return self.to_timestamp - self.from_timestamp


@attrs.frozen
class SourceEpisode:
    index: int
    length: int
    tasks: tuple[str, ...]
    # Per-feature statistics as stored (features without them are absent).
    stats: Mapping[str, FeatureStats]
    videos: Mapping[str, VideoSpan]
    data_file: Path


class EpisodeSource(Protocol):
    """A dataset whose episodes can be copied: its metadata, each episode and its rows."""

    @property
    def root(self) -> Path: ...

    @property
    def meta(self) -> DatasetMeta: ...

    def episode(self, index: int) -> SourceEpisode: ...

    def rows(self, index: int) -> pa.Table:
        """The data rows of one episode, in frame order, with the source's columns and types."""
        ...


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


def codebase_major(root: Path) -> int:
    """The major format version of the dataset at `root` (2 for v2.1, 3 for v3.0)."""
    path = root / INFO_PATH
    info = read_json(path, "dataset info file", root)
    version = info.get("codebase_version") if isinstance(info, dict) else None
    return parse_version(version, f"{path}: codebase_version")[0]


def open_source(location: str | Path) -> EpisodeSource:
    root = dataset_root(location)
    if (root / INFO_PATH).is_file() and codebase_major(root) == 2:
        from rlctl.adapters.storage.lerobot_v21.source import V21Source

        return V21Source(root)
    return V3Source(root)
