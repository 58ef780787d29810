"""What an Arrow column of numbers holds: its nesting, and the values that are not numbers.

Whole columns at a time through pyarrow compute (a million values in milliseconds), never a
Python loop over rows: `bad_values` answers "all finite" from one pass, and only when something is
wrong works out which rows hold it.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlctl.domain.features import FeatureSpec

SHAPE_HINT = (
    "meta/info.json and the data disagree: set the feature's shape in info.json to what each "
    "row holds if the data is right, or rewrite the data"
)
# Codes of `BadValues.kinds`, and how each is named to a user.
NAN, POS_INF, NEG_INF, EMPTY = 0, 1, 2, 3
KIND_NAMES = ("NaN", "+inf", "-inf", "empty")


def storage_type(kind: pa.DataType) -> pa.DataType:
    """The type an extension type (`datasets`' ArrayND) stores its values as."""
    while isinstance(kind, pa.ExtensionType):
        kind = kind.storage_type
    return kind


def is_list_type(kind: pa.DataType) -> bool:
    return (
        pa.types.is_list(kind)
        or pa.types.is_large_list(kind)
        or pa.types.is_fixed_size_list(kind)
        or pa.types.is_list_view(kind)
        or pa.types.is_large_list_view(kind)
    )


def list_levels(kind: pa.DataType) -> tuple[tuple[int | None, ...], pa.DataType]:
    """The list levels of a column type, outermost first (a fixed size, or None when each row
    may differ), and the type of the values inside."""
    levels: list[int | None] = []
    kind = storage_type(kind)
    while is_list_type(kind):
        levels.append(kind.list_size if pa.types.is_fixed_size_list(kind) else None)
        kind = storage_type(kind.value_type)
    return tuple(levels), kind


def is_number_type(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)


def stored_name(kind: pa.DataType) -> str:
    """A column's value type as a feature's dtype would name it (float32, int64, string ...)."""
    kind = storage_type(kind)
    if is_number_type(kind):
        return str(np.dtype(kind.to_pandas_dtype()))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    return str(kind)


def holds(levels: tuple[int | None, ...], leaf: pa.DataType) -> str:
    """'float32 values', 'lists of 7 float32 values', 'lists of lists of int64 values' ..."""
    text = f"{stored_name(leaf)} values"
    for size in reversed(levels):
        text = f"lists of {size if size is not None else 'any number of'} {text}"
    return text


def shape_problem(spec: FeatureSpec, column: pa.Array | pa.ChunkedArray) -> str | None:
    """How the column's rows differ from the feature's declared shape, None when they fit.

    Shape [] and [1] are one value a row (a list of one value too); any other shape is one
    level of lists per dimension, each list as long as its dimension."""
    levels, leaf = list_levels(column.type)
    shape = tuple(spec.shape)
    declared = f"feature {spec.key!r} declares shape {list(shape)}"
    if shape in ((), (1,)):
        dims: tuple[int, ...] = (1,) * len(levels) if len(levels) <= 1 else ()
        if len(levels) > 1:
            return f"{declared} (one value a row) but its column holds {holds(levels, leaf)}"
    else:
        dims = shape
        if len(levels) != len(shape):
            return f"{declared} but its column holds {holds(levels, leaf)}"
    for depth, (size, dim) in enumerate(zip(levels, dims, strict=True)):
        if size is not None and size != dim:
            return f"{declared} but its column holds {holds(levels, leaf)}" + (
                f" (dimension {depth})" if len(dims) > 1 else ""
            )
    wrong = list_lengths_problem(column, dims)
    if wrong is not None:
        depth, dim, found, row = wrong
        at = f"dimension {depth} of " if len(dims) > 1 else ""
        held = "an empty entry" if found < 0 else f"{found} values"
        return (
            f"{declared} but {at}row {row} of its column holds {held} where the shape needs {dim}"
        )
    return None


def _array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    while isinstance(column, pa.ExtensionArray):
        column = column.storage
    return column


def flatten_levels(column: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, list[pa.Array]]:
    """The innermost values of a (nested) list column, and each level's lists outermost first
    (for their lengths); slicing offsets respected."""
    values = _array(column)
    levels = []
    while is_list_type(values.type):
        levels.append(values)
        values = _array(values.flatten())
    return values, levels


def _rows_of(levels: Sequence[pa.Array], positions: np.ndarray) -> np.ndarray:
    """Rows of the column holding the innermost values at `positions`."""
    for level in reversed(levels):
        positions = pc.list_parent_indices(level).to_numpy()[positions]
    return positions.astype(np.int64, copy=False)


@attrs.frozen
class BadValues:
    """Values of a column that are not finite numbers: for each, its row and its kind code."""

    rows: np.ndarray
    kinds: np.ndarray

    def counts(self, mask: np.ndarray | None = None) -> str:
        """'3 NaN, 1 +inf' for the values `mask` picks (booleans or positions; default all)."""
        kinds = self.kinds if mask is None else self.kinds[mask]
        found = np.bincount(kinds, minlength=len(KIND_NAMES))
        return ", ".join(f"{n} {KIND_NAMES[k]}" for k, n in enumerate(found) if n)


def bad_values(column: pa.Array | pa.ChunkedArray, *, empty: bool = True) -> BadValues | None:
    """NaN, +inf and -inf (and with `empty`, missing values) in a column of numbers, nested
    lists included; None when there are none (one vectorised pass) or the column holds no
    numbers."""
    top = _array(column)
    values, levels = flatten_levels(top)
    if not is_number_type(values.type):
        return None
    floating = pa.types.is_floating(values.type)
    top_nulls = top.null_count if levels and empty else 0
    if (
        values.null_count == 0
        and top_nulls == 0
        and (not floating or pc.all(pc.is_finite(values)).as_py() in (True, None))
    ):
        return None
    kinds = np.full(len(values), -1, dtype=np.int8)
    if floating:
        numbers = values.to_numpy(zero_copy_only=False)
        with np.errstate(invalid="ignore"):
            kinds[np.isnan(numbers)] = NAN
            kinds[numbers == np.inf] = POS_INF
            kinds[numbers == -np.inf] = NEG_INF
    if values.null_count:
        kinds[pc.is_null(values).to_numpy(zero_copy_only=False)] = EMPTY if empty else -1
    positions = np.flatnonzero(kinds >= 0)
    rows, codes = _rows_of(levels, positions), kinds[positions]
    if top_nulls:
        missing = np.flatnonzero(pc.is_null(top).to_numpy(zero_copy_only=False))
        rows = np.concatenate([rows, missing])
        codes = np.concatenate([codes, np.full(len(missing), EMPTY, np.int8)])
    if not len(rows):
        return None
    order = np.argsort(rows, kind="stable")
    return BadValues(rows[order], codes[order])


def uneven_lists(column: pa.Array | pa.ChunkedArray) -> tuple[int, int, int] | None:
    """(level, shortest, longest) of the first list level whose lists differ in length (or
    hold empty entries); None when every level is even, which a reshape needs."""
    _, levels = flatten_levels(column)
    for depth, level in enumerate(levels):
        if pa.types.is_fixed_size_list(level.type) and not level.null_count:
            continue
        lengths = pc.list_value_length(level)
        if lengths.null_count:
            return depth, 0, int(pc.max(lengths).as_py() or 0)
        bounds = pc.min_max(lengths).as_py()
        if bounds["min"] is not None and bounds["min"] != bounds["max"]:
            return depth, int(bounds["min"]), int(bounds["max"])
    return None


def list_lengths_problem(
    column: pa.Array | pa.ChunkedArray, dims: Sequence[int]
) -> tuple[int, int, int, int] | None:
    """(level, expected, found, first row) for the first list level (one per dimension in `dims`)
    holding a list whose length is not that dimension; None when all fit."""
    _, levels = flatten_levels(column)
    for depth, (level, dim) in enumerate(zip(levels, dims, strict=False)):
        lengths = pc.list_value_length(level)
        wrong = pc.fill_null(pc.not_equal(lengths, dim), True)
        if not pc.any(wrong).as_py():
            continue
        position = int(np.flatnonzero(wrong.to_numpy(zero_copy_only=False))[0])
        found = lengths[position].as_py()
        row = int(_rows_of(levels[:depth], np.array([position]))[0])
        return depth, dim, -1 if found is None else int(found), row
    return None
