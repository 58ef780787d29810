"""What `rlctl dataset check` compares beyond the rows: the types and values of a data file.

- Each feature's declared dtype and shape (meta/info.json) against the column the parquet file
  stores: a `complex128` or `int64` declared over float32 numbers, a string over numbers, a shape
  [6] over lists of 7, lists of uneven length.
- Every column of numbers, nested lists included, for NaN, +inf, -inf and empty values, reported
  per episode and column with counts and the first frame holding one.

Both work on whole columns (pyarrow compute), so a check stays as fast as reading the file.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa

from rlctl.adapters.storage.lerobot_v3.column_values import (
    SHAPE_HINT,
    bad_values,
    holds,
    is_number_type,
    list_levels,
    shape_problem,
    storage_type,
    stored_name,
)
from rlctl.adapters.storage.lerobot_v3.tools.findings import Findings
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.features import DEFAULT_FEATURE_KEYS, NUMERIC_DTYPES

# Names `datasets` (hence LeRobot) also accepts for a number type.
_DTYPE_ALIASES = {
    "float": "float32",
    "double": "float64",
    "halffloat": "float16",
    "boolean": "bool",
}
DTYPE_HINT = (
    "meta/info.json and the data disagree: set the feature's dtype in info.json to what the data "
    "holds if the data is right, or rewrite the data (e.g. record or convert it again)"
)
VALUES_HINT = (
    "values that are not finite numbers turn normalisation and training losses into NaN: "
    "record the episode again, or remove it (rlctl dataset delete-episodes {root} "
    "--episodes {episode})"
)


def declared_numbers(dtype: str) -> np.dtype | None:
    """The number type a declared dtype names, None when it names no type a column stores."""
    name = _DTYPE_ALIASES.get(dtype, dtype)
    return np.dtype(name) if name in NUMERIC_DTYPES else None


def _is_image_storage(kind: pa.DataType) -> bool:
    kind = storage_type(kind)
    if pa.types.is_struct(kind):
        return kind.get_field_index("bytes") >= 0 or kind.get_field_index("path") >= 0
    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind)


def declared_type_problems(
    path: Path, table: pa.Table, meta: DatasetMeta, findings: Findings
) -> set[str]:
    """Report each feature whose declared dtype or shape differs from its column; the keys whose
    column cannot even be shaped as declared (their values must not be read as that shape)."""
    unshaped: set[str] = set()
    for key, spec in meta.features.items():
        if spec.is_video or spec.is_language or key not in table.column_names:
            continue
        column = table.column(key)
        kind = table.schema.field(key).type
        levels, leaf = list_levels(kind)

        def add(message: str, hint: str, key: str = key) -> None:
            findings.add(message, file=path, key=key, hint=hint, kind="declared types")

        declared = f"feature {key!r} is declared {spec.dtype!r} in meta/info.json"
        if spec.is_image:
            if not _is_image_storage(kind):
                add(f"{declared} but its column holds {holds(levels, leaf)}", DTYPE_HINT)
                unshaped.add(key)
            continue
        if spec.is_string:
            if levels or stored_name(leaf) != "string":
                add(f"{declared} but its column holds {holds(levels, leaf)}", DTYPE_HINT)
            continue
        number = declared_numbers(spec.dtype)
        if not is_number_type(leaf):
            add(f"{declared} but its column holds {holds(levels, leaf)}", DTYPE_HINT)
            unshaped.add(key)
            continue
        if number is None:
            add(
                f"{declared}, which is no type of numbers a LeRobot data column holds "
                f"(its column holds {holds(levels, leaf)})",
                f"use one of {', '.join(sorted(NUMERIC_DTYPES))}; " + DTYPE_HINT,
            )
        elif number != np.dtype(leaf.to_pandas_dtype()):
            add(f"{declared} but its column holds {stored_name(leaf)} values", DTYPE_HINT)
        problem = shape_problem(spec, column)
        if problem is not None:
            add(problem, SHAPE_HINT)
            unshaped.add(key)
    return unshaped


def value_problems(
    path: Path,
    table: pa.Table,
    episode_index: np.ndarray,
    frame_index: np.ndarray | None,
    findings: Findings,
    skip: set[str],
) -> None:
    """NaN, +inf, -inf and empty values of every column of numbers, per episode."""
    for key in table.column_names:
        if key in DEFAULT_FEATURE_KEYS or key in skip:
            continue  # the bookkeeping columns have their own rules
        found = bad_values(table.column(key))
        if found is None:
            continue
        episodes = episode_index[found.rows]
        # Grouped by episode (a stable sort keeps each episode's values in row order).
        order = np.argsort(episodes, kind="stable")
        ordered = episodes[order]
        bounds = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True])
        for start, end in itertools.pairwise(bounds.tolist()):
            picked = order[start:end]
            episode = int(ordered[start])
            rows = found.rows[picked]
            first = int(rows[0])
            frame = f"frame {int(frame_index[first])}, " if frame_index is not None else ""
            findings.add(
                f"holds {found.counts(picked)} value(s) in {len(np.unique(rows))} row(s); the "
                f"first at {frame}row {first} of the file",
                file=path,
                key=key,
                episode=episode,
                hint=VALUES_HINT.format(root=findings.root, episode=episode),
                kind=f"values of {key} that are not finite numbers",
            )
