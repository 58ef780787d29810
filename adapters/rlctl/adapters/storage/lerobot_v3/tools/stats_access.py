"""`DatasetStatsAccess` on LeRobot v3.0 folders: the values statistics are computed from, and
writing them back (per-episode columns of meta/episodes, then stats.json)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rlctl.adapters.storage.dataset_lock import DatasetLock
from rlctl.adapters.storage.episode_source import VideoSpan
from rlctl.adapters.storage.lerobot_v3.atomic_files import write_atomic, write_json_atomic
from rlctl.adapters.storage.lerobot_v3.errors import read_parquet_table
from rlctl.adapters.storage.lerobot_v3.images import decode_image
from rlctl.adapters.storage.lerobot_v3.meta_reader import (
    LeRobotMetaReader,
    dataset_root,
    episode_files,
)
from rlctl.adapters.storage.lerobot_v3.meta_writer import (
    EpisodesSchema,
    stats_columns,
    stats_shapes,
)
from rlctl.adapters.storage.lerobot_v3.paths import (
    STATS_PATH,
    episode_data_file,
    episode_video_file,
    episode_video_span,
)
from rlctl.adapters.storage.lerobot_v3.table import files_in_order, numeric_column
from rlctl.adapters.storage.lerobot_v3.tools.sources import episode_rows
from rlctl.adapters.storage.lerobot_v3.tools.video_spans import decode_span
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import CorruptDataset
from rlctl.domain.features import FeatureSpec
from rlctl.domain.statistics import FeatureStats, stats_to_json


class LeRobotStatsAccess:
    def __init__(self) -> None:
        self._metas: dict[Path, DatasetMeta] = {}

    def lock(self, location: str) -> DatasetLock:
        return DatasetLock(dataset_root(location))

    def _meta(self, location: str | Path) -> tuple[Path, DatasetMeta]:
        root = dataset_root(location)
        if root not in self._metas:
            self._metas[root] = LeRobotMetaReader().read_meta(root)
        return root, self._metas[root]

    def numeric_columns(
        self, location: str, keys: Sequence[str]
    ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        root, meta = self._meta(location)
        wanted = list(dict.fromkeys([*keys, "episode_index"]))
        for path, episodes in files_in_order(root, meta, meta.episodes):
            table = read_parquet_table(path, "data file", root, columns=wanted)
            episode_index = table.column("episode_index").to_numpy()
            columns = {
                key: numeric_column(table.column(key), _spec(meta, key), f"{path}: {key}")
                for key in keys
            }
            for episode in episodes:
                rows = np.flatnonzero(episode_index == episode.index)
                if len(rows) != episode.length:
                    raise CorruptDataset(
                        f"episode {episode.index} should have {episode.length} rows, found "
                        f"{len(rows)}",
                        where=f"{path}: episode {episode.index}",
                        hint=f"run `rlctl dataset check {root}` to list every problem",
                    )
                yield episode.index, {key: values[rows] for key, values in columns.items()}

    def frames(self, location: str, key: str, episode: int, indices: Sequence[int]) -> np.ndarray:
        root, meta = self._meta(location)
        record = meta.episodes[episode]
        chosen = np.asarray(indices, dtype=np.int64)
        if meta.features[key].is_video:
            start, end = episode_video_span(record, key)
            span = VideoSpan(root / episode_video_file(meta, record, key), start, end)
            frames = decode_span(span, meta.fps)
            return frames[np.minimum(chosen, len(frames) - 1)]
        path = root / episode_data_file(meta, record)
        column = episode_rows(path, root, episode, record.length).column(key).combine_chunks()
        blobs = column.field("bytes") if pa.types.is_struct(column.type) else column
        images = [decode_image(blobs[int(i)].as_py()) for i in chosen]
        return np.stack([image if image.ndim == 3 else image[:, :, None] for image in images])

    def write_stats(
        self,
        location: str,
        episode_stats: Mapping[int, Mapping[str, FeatureStats]],
        stats: Mapping[str, FeatureStats],
    ) -> None:
        root, meta = self._meta(location)
        full = EpisodesSchema(meta.video_keys, stats_shapes(meta.features)).arrow
        for path in episode_files(root):
            table = read_parquet_table(path, "episodes metadata file", root)
            rows = table.to_pylist()
            for row in rows:
                row.update(stats_columns(episode_stats.get(int(row["episode_index"]), {})))
            schema = _widened(table.schema, full, rows)
            write_atomic(
                path,
                functools.partial(
                    pq.write_table, pa.Table.from_pylist(rows, schema=schema), compression="snappy"
                ),
            )
        write_json_atomic(root / STATS_PATH, stats_to_json(stats))
        self._metas.pop(root, None)


def _spec(meta: DatasetMeta, key: str) -> FeatureSpec:
    return meta.features.get(key) or FeatureSpec(key=key, dtype="int64", shape=(1,))


def _widened(schema: pa.Schema, full: pa.Schema, rows: list[dict]) -> pa.Schema:
    """The file's schema plus the statistic columns the new rows bring (typed as the writer's)."""
    present = {name for row in rows for name in row}
    fields = list(schema)
    for field in full:
        if field.name in present and schema.get_field_index(field.name) < 0:
            fields.append(field)
    return pa.schema(fields, metadata=schema.metadata)
