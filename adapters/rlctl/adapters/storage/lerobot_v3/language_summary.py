"""`LanguageAnnotations` for LeRobot v3.0 folders: the annotation rows of `rlctl dataset info`.

Only `episode_index` and the language columns of each data file are read. The persistent list is
repeated on every frame of an episode, so it is counted once per episode (its first frame's);
events are counted on every frame that carries them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlctl.adapters.storage.lerobot_v3.errors import read_parquet_table
from rlctl.adapters.storage.lerobot_v3.language_columns import canonical
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader, dataset_root
from rlctl.adapters.storage.lerobot_v3.table import files_in_order
from rlctl.domain.language import LANGUAGE_PERSISTENT, ColumnSummary, summarize_column


class LeRobotLanguageSummary:
    def summarize_language(self, location: str) -> Mapping[str, ColumnSummary]:
        root = dataset_root(location)
        meta = LeRobotMetaReader().read_meta(root)
        keys = [k for k, spec in meta.features.items() if spec.is_language]
        if not keys:
            return {}
        files = [path for path, _ in files_in_order(root, meta, meta.episodes)]
        return {
            key: summarize_column(_episode_rows(root, files, key, key == LANGUAGE_PERSISTENT))
            for key in keys
        }


def _episode_rows(
    root: Path, files: list[Path], key: str, once_per_episode: bool
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    for path in files:
        table = read_parquet_table(path, "data file", root, columns=["episode_index", key])
        episodes = table.column("episode_index").to_numpy()
        column = canonical(table.column(key), key)
        if once_per_episode:
            _, first = np.unique(episodes, return_index=True)
            picked = np.sort(first)
        else:
            picked = np.flatnonzero(_list_sizes(column) > 0)
        if not len(picked):
            continue
        chosen = column.take(pa.array(picked))
        styles = chosen.flatten().field("style").to_pylist()
        cameras = chosen.flatten().field("camera").to_pylist()
        sizes = _list_sizes(chosen)
        start = 0
        for row, size in zip(picked.tolist(), sizes.tolist(), strict=True):
            rows = [{"style": styles[i], "camera": cameras[i]} for i in range(start, start + size)]
            start += size
            yield int(episodes[row]), rows


def _list_sizes(column: pa.Array) -> np.ndarray:
    """Rows in each cell (0 for a null cell)."""
    return pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
