"""Writing a rebuilt dataset's `meta/episodes/chunk-XXX/file-YYY.parquet` in one go.

The columns are the writer's (`EpisodesSchema`), except that a statistic column is only written
when some episode has it: datasets converted from v2.1 have no quantiles, and a column of nulls
would claim otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from rlctl.adapters.storage.lerobot_v3.meta_writer import (
    EpisodeEntry,
    EpisodesSchema,
    next_file,
)
from rlctl.adapters.storage.lerobot_v3.paths import EPISODES_PATH

_MB = 1024 * 1024
_BOOK_COLUMNS = ("meta/episodes/chunk_index", "meta/episodes/file_index")


@attrs.define
class EpisodesFile:
    """Rows collected while episodes are added; `write` lays them out into files."""

    video_keys: Sequence[str]
    stats_shapes: Mapping[str, tuple[int, ...]]
    rows: list[dict[str, Any]] = attrs.field(factory=list)

    def add(self, entry: EpisodeEntry) -> dict[str, Any]:
        row = entry.row()
        self.rows.append(row)
        return row

    def schema(self) -> pa.Schema:
        full = EpisodesSchema(self.video_keys, self.stats_shapes).arrow
        present = {name for row in self.rows for name in row}
        return pa.schema([f for f in full if not f.name.startswith("stats/") or f.name in present])

    def write(self, root: Path, *, chunks_size: int, max_file_mb: float) -> None:
        if not self.rows:
            return
        schema = self.schema()
        probe = pa.Table.from_pylist(
            [{**self.rows[0], **dict.fromkeys(_BOOK_COLUMNS, 0)}], schema=schema
        )
        per_file = max(1, int(max_file_mb * _MB // max(1, probe.nbytes)))
        position = (0, 0)
        for start in range(0, len(self.rows), per_file):
            if start:
                position = next_file(*position, chunks_size)
            part = self.rows[start : start + per_file]
            for row in part:
                row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = position
            path = root / EPISODES_PATH.format(chunk_index=position[0], file_index=position[1])
            path.parent.mkdir(parents=True, exist_ok=True)
            table = pa.Table.from_pylist(part, schema=schema)
            pq.write_table(table, path, compression="snappy")
