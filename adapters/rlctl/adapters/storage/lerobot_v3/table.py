"""The data rows of a LeRobot v3.0 dataset, read once into numpy columns for fast random access.

LeRobot answers each `[i]` through Hugging Face `datasets`, which converts rows to Python lists
and then to tensors; a 50-step action window costs 50 such rows. Here every numeric feature is one
contiguous numpy array `(rows, *shape)`, so a window is a single fancy-index. Image and string
columns stay Arrow arrays and are converted only for the rows asked.

Rows are in LeRobot's order: data files sorted by path, rows in file order, restricted to the
selected episodes. Loading checks that the rows agree with `meta/episodes` (each episode's
`index` values are exactly `[dataset_from_index, dataset_to_index)`), which is what makes the
window arithmetic (`position + (global row - global index)`) valid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlctl.adapters.storage.lerobot_v3.column_values import (
    SHAPE_HINT,
    shape_problem,
    uneven_lists,
)
from rlctl.adapters.storage.lerobot_v3.errors import (
    CORRUPT_HINT,
    check_hint,
    read_parquet_schema,
    read_parquet_table,
)
from rlctl.adapters.storage.lerobot_v3.language_columns import canonical_table
from rlctl.adapters.storage.lerobot_v3.paths import EPISODES_DIR, episode_data_file
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import CorruptDataset
from rlctl.domain.features import DEFAULT_FEATURE_KEYS, FeatureSpec

# LeRobot builds item tensors from Python scalars, so every float becomes float32 and every
# integer int64, whatever the stored width; the same casts keep items identical.
_FLOAT_KINDS = "f"
_INT_KINDS = "iu"


def item_dtype(stored: np.dtype) -> np.dtype:
    if stored.kind in _FLOAT_KINDS:
        return np.dtype(np.float32)
    if stored.kind in _INT_KINDS:
        return np.dtype(np.int64)
    return stored


@attrs.frozen(eq=False)
class FrameTable:
    """Rows of the selected episodes. `numeric[key]` is `(rows, *shape)`; `(rows,)` for shape (1,).

    `episode_from` / `episode_to` give, per row, the global rows of its episode, so a window
    around a row needs no lookup. `arrow[key]` holds image structs, strings and nested columns.
    """

    numeric: dict[str, np.ndarray]
    arrow: dict[str, pa.Array]
    episode_from: np.ndarray
    episode_to: np.ndarray
    files: tuple[Path, ...]

    def __len__(self) -> int:
        return len(self.episode_from)

    @property
    def index(self) -> np.ndarray:
        return self.numeric["index"]

    @property
    def episode_index(self) -> np.ndarray:
        return self.numeric["episode_index"]

    @property
    def timestamp(self) -> np.ndarray:
        return self.numeric["timestamp"]

    @property
    def task_index(self) -> np.ndarray:
        return self.numeric["task_index"]

    def rows_of(self, position: int, global_rows: np.ndarray) -> np.ndarray:
        """Positions in this table of global rows of the same episode as `position`."""
        return position + (global_rows - self.index[position])


def stored_columns(meta: DatasetMeta) -> list[str]:
    """Columns the data files must hold: every feature but videos, plus the bookkeeping ones."""
    keys = [k for k, f in meta.features.items() if not f.is_video]
    return keys + [k for k in DEFAULT_FEATURE_KEYS if k not in keys]


def files_in_order(
    root: Path, meta: DatasetMeta, episodes: Sequence[EpisodeRecord]
) -> list[tuple[Path, list[EpisodeRecord]]]:
    """Data files holding `episodes`, sorted by path as LeRobot reads them, with their episodes."""
    by_file: dict[Path, list[EpisodeRecord]] = {}
    for episode in episodes:
        by_file.setdefault(root / episode_data_file(meta, episode), []).append(episode)
    return [
        (path, sorted(by_file[path], key=lambda e: e.dataset_from_index))
        for path in sorted(by_file)
    ]


def load_frame_table(
    root: Path, meta: DatasetMeta, episodes: Sequence[EpisodeRecord]
) -> FrameTable:
    """Read the rows of `episodes` from their data files and check them against the metadata."""
    columns = stored_columns(meta)
    plan = files_in_order(root, meta, episodes)
    parts: list[pa.Table] = []
    for path, file_episodes in plan:
        parts.append(_read_rows(root, path, columns, file_episodes, meta))
    return frame_table(root, meta, plan, parts)


def frame_table(
    root: Path,
    meta: DatasetMeta,
    plan: list[tuple[Path, list[EpisodeRecord]]],
    parts: list[pa.Table],
) -> FrameTable:
    """The rows of each planned file (`checked_rows` of it), as one checked `FrameTable`."""
    columns = stored_columns(meta)
    table = _concat(parts, columns)
    numeric: dict[str, np.ndarray] = {}
    arrow: dict[str, pa.Array] = {}
    for key in columns:
        spec = meta.features.get(key) or FeatureSpec(key=key, dtype="int64", shape=(1,))
        column = table.column(key)
        if spec.is_visual and _is_numeric(column.type):
            raise CorruptDataset(
                f"feature {key!r} is an {spec.dtype} in meta/info.json but its data column "
                f"holds {column.type}",
                where=_where(plan, key),
                hint="restore meta/info.json from the original dataset; "
                + check_hint(root, "`rlctl dataset check ROOT` lists every problem"),
            )
        if _is_numeric(column.type):
            numeric[key] = numeric_column(column, spec, where=_where(plan, key))
        else:
            arrow[key] = column.combine_chunks()
    ordered = [e for _, file_episodes in plan for e in file_episodes]
    _check_rows(root, numeric, ordered, plan)
    lengths = np.array([e.length for e in ordered], dtype=np.int64)
    return FrameTable(
        numeric=numeric,
        arrow=arrow,
        episode_from=np.repeat(
            np.array([e.dataset_from_index for e in ordered], np.int64), lengths
        ),
        episode_to=np.repeat(np.array([e.dataset_to_index for e in ordered], np.int64), lengths),
        files=tuple(path for path, _ in plan),
    )


def _where(plan: list[tuple[Path, list[EpisodeRecord]]], key: str) -> str:
    files = ", ".join(str(path) for path, _ in plan[:3]) + (" ..." if len(plan) > 3 else "")
    return f"{files}: {key}"


def _read_rows(
    root: Path,
    path: Path,
    columns: list[str],
    episodes: list[EpisodeRecord],
    meta: DatasetMeta,
) -> pa.Table:
    schema = read_parquet_schema(path, "data file", root)
    missing = [key for key in columns if key not in schema.names]
    if missing:
        others = f"{len(missing) - 1} more column(s) are missing too; " if len(missing) > 1 else ""
        raise CorruptDataset(
            missing_column_message(missing[0], meta),
            where=f"{path}: {missing[0]}",
            hint=(
                others
                + "remove the feature from meta/info.json, or rewrite the data with it; "
                + check_hint(root, "`rlctl dataset check ROOT` lists every problem")
            ),
        )
    table = read_parquet_table(path, "data file", root, columns=columns)
    return canonical_table(checked_rows(root, path, table, episodes), meta)


def checked_rows(
    root: Path, path: Path, table: pa.Table, episodes: list[EpisodeRecord]
) -> pa.Table:
    """The rows of `episodes` in `table` (read from the data file `path`), checked: bookkeeping
    columns of numbers, and each episode with as many rows as meta/episodes gives it."""
    wrong = bookkeeping_problem(table)
    if wrong is not None:
        raise CorruptDataset(
            wrong[1],
            where=f"{path}: {wrong[0]}",
            hint=check_hint(root, "`rlctl dataset check ROOT` lists every problem"),
        )
    wanted = pa.array([e.index for e in episodes], pa.int64())
    keep = pc.is_in(table.column("episode_index"), value_set=wanted)
    if not pc.all(keep).as_py():
        table = table.filter(keep)
    # Counted before any row range is built: lengths come from metadata, which may be absurd.
    held = table.column("episode_index").to_numpy()
    for episode in episodes:
        rows = int(np.count_nonzero(held == episode.index))
        if rows != episode.length:
            raise CorruptDataset(
                row_count_message(episode.length, rows),
                where=f"{path}: episode {episode.index}",
                hint=check_hint(root, "`rlctl dataset check ROOT` lists every problem"),
            )
    return table


def missing_column_message(key: str, meta: DatasetMeta) -> str:
    declared = " declared in meta/info.json" if key in meta.features else ""
    return f"no data column for {key!r}{declared}"


def task_index_message(bad: int, tasks: int) -> str:
    return f"task_index {bad} is not in meta/tasks.parquet ({tasks} task(s))"


def row_count_message(declared: int, held: int) -> str:
    return f"meta/episodes gives it {declared} rows but the file holds {held}"


def bookkeeping_problem(table: pa.Table) -> tuple[str, str] | None:
    """(column, message) when a bookkeeping column of a data file is not a column of numbers
    without gaps: rows are found by `episode_index` and `index` before any feature is read."""
    for key in DEFAULT_FEATURE_KEYS:
        if key not in table.column_names:
            continue
        column = table.column(key)
        kind = column.type
        timestamp = key == "timestamp"
        if not (pa.types.is_integer(kind) or (timestamp and pa.types.is_floating(kind))):
            return (
                key,
                f"column {key} must hold {'numbers' if timestamp else 'integers'}, found {kind}",
            )
        if column.null_count:
            return key, f"column {key} has {column.null_count} empty value(s)"
        if timestamp and pa.types.is_floating(kind) and not pc.all(pc.is_finite(column)).as_py():
            return key, "column timestamp holds values that are not finite numbers"
    return None


def _concat(parts: list[pa.Table], columns: list[str]) -> pa.Table:
    if not parts:
        return pa.table({key: pa.array([], pa.int64()) for key in columns})
    if len(parts) == 1:
        return parts[0]
    # Files written at different times may disagree on list vs fixed-size list: unify, do not fail.
    return pa.concat_tables(parts, promote_options="permissive")


def _is_numeric(arrow_type: pa.DataType) -> bool:
    while _is_list(arrow_type):
        arrow_type = arrow_type.value_type
    return (
        pa.types.is_integer(arrow_type)
        or pa.types.is_floating(arrow_type)
        or pa.types.is_boolean(arrow_type)
    )


def _is_list(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    )


def numeric_column(column: pa.ChunkedArray, spec: FeatureSpec, where: str) -> np.ndarray:
    """A numeric (possibly nested-list) column as one `(rows, *shape)` array of the item dtype."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    rows = len(array)
    values: pa.Array = array
    while _is_list(values.type):
        values = values.flatten()  # respects slicing offsets, unlike `.values`
    flat = values.to_numpy(zero_copy_only=False)
    per_row = math.prod(spec.shape)
    # Equal totals are not enough: rows of 5 and 7 values read as rows of 6 would shift every
    # later row by one value. (Lists of even length are read whatever their nesting.)
    if flat.size != rows * per_row or uneven_lists(array) is not None:
        raise CorruptDataset(
            shape_problem(spec, array)
            or f"feature {spec.key!r} declares shape {list(spec.shape)} ({per_row} values a row) "
            f"but the data holds {flat.size} values for {rows} rows",
            where=where,
            hint=SHAPE_HINT,
        )
    shape = (rows,) if tuple(spec.shape) == (1,) else (rows, *spec.shape)
    return np.ascontiguousarray(flat.astype(item_dtype(flat.dtype), copy=False).reshape(shape))


def _check_rows(
    root: Path,
    numeric: dict[str, np.ndarray],
    ordered: list[EpisodeRecord],
    plan: list[tuple[Path, list[EpisodeRecord]]],
) -> None:
    """Each episode's rows must be exactly its `[dataset_from_index, dataset_to_index)`."""
    index, episode_index = numeric["index"], numeric["episode_index"]
    expected_index = np.concatenate(
        [np.arange(e.dataset_from_index, e.dataset_to_index) for e in ordered]
        or [np.zeros(0, np.int64)]
    ).astype(np.int64)
    expected_episode = np.repeat(
        np.array([e.index for e in ordered], np.int64), [e.length for e in ordered]
    )
    if (
        len(index) == len(expected_index)
        and np.array_equal(index, expected_index)
        and (np.array_equal(episode_index, expected_episode))
    ):
        return
    episode, found = _first_disagreement(index, episode_index, ordered)
    path = next(p for p, eps in plan if any(e.index == episode.index for e in eps))
    raise CorruptDataset(
        f"episode {episode.index}: meta/episodes gives it rows [{episode.dataset_from_index}, "
        f"{episode.dataset_to_index}) but the data file holds {found}",
        where=f"{path}: episode {episode.index}",
        hint=(
            f"the data and {EPISODES_DIR} disagree (an interrupted write or a partial edit?); "
            + check_hint(root, CORRUPT_HINT)
        ),
    )


def _first_disagreement(
    index: np.ndarray, episode_index: np.ndarray, ordered: list[EpisodeRecord]
) -> tuple[EpisodeRecord, str]:
    for episode in ordered:
        rows = index[episode_index == episode.index]
        expected = np.arange(episode.dataset_from_index, episode.dataset_to_index)
        if len(rows) != len(expected):
            return episode, f"{len(rows)} rows"
        if not np.array_equal(rows, expected):
            return episode, f"rows with index {_span(rows)}"
    stray = sorted(set(episode_index.tolist()) - {e.index for e in ordered})
    if stray:
        return ordered[0], f"rows of episode(s) {stray[:5]} that meta/episodes does not place"
    return ordered[0], "its rows out of order"


def _span(rows: np.ndarray) -> str:
    if len(rows) and np.array_equal(rows, np.arange(rows[0], rows[0] + len(rows))):
        return f"[{rows[0]}, {rows[0] + len(rows)})"
    return str(rows[:8].tolist()) + (" ..." if len(rows) > 8 else "")
