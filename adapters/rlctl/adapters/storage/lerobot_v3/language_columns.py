"""`language_persistent` / `language_events` in parquet, as LeRobot 0.6.1 types and returns them.

On disk each is a list of structs (`role`, `content`, `style`, [`timestamp`,] `camera`,
`tool_calls`). LeRobot's annotation writer lets pyarrow infer the struct (a `timestamp` of
float64, a `camera` of null when no row has one, `tool_calls` as nested structs), and its reader
casts whatever it finds to one canonical type: strings, a float32 `timestamp`, and `tool_calls`
as a list of JSON values. rlctl does the same cast (`canonical`) so that files written either way
concatenate, and writes the canonical type itself. Items hold the rows as LeRobot's
`__getitem__` returns them: a list of dicts per column, `tool_calls` None or decoded JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import FeatureMismatch
from rlctl.domain.features import FeatureSpec
from rlctl.domain.language import LANGUAGE_PERSISTENT, row_fields

_JSON = pa.json_()
_STRING = {"role", "content", "style", "camera"}


def _field_type(name: str, *, stored: bool) -> pa.DataType:
    if name == "timestamp":
        return pa.float32()
    if name == "tool_calls":
        # pyarrow builds no JSON extension arrays from Python values: strings, wrapped after.
        return pa.list_(pa.string() if stored else _JSON)
    return pa.string()


def row_type(key: str, *, stored: bool = False) -> pa.StructType:
    return pa.struct([(name, _field_type(name, stored=stored)) for name in row_fields(key)])


def arrow_type(key: str) -> pa.DataType:
    """The canonical column type (LeRobot's `language_*_arrow_type`)."""
    return pa.list_(row_type(key))


def hf_feature(key: str) -> dict[str, Any]:
    """The `datasets` feature LeRobot declares for the column (schema metadata)."""
    fields: dict[str, Any] = {}
    for name in row_fields(key):
        if name == "tool_calls":
            fields[name] = {"feature": {"_type": "Json"}, "_type": "List"}
        else:
            dtype = "float32" if name == "timestamp" else "string"
            fields[name] = {"dtype": dtype, "_type": "Value"}
    return {"feature": fields, "_type": "List"}


def canonical(column: pa.Array | pa.ChunkedArray, key: str) -> pa.Array:
    """`column` (any type LeRobot's writers leave) cast to `arrow_type(key)`."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    target = arrow_type(key)
    if array.type == target:
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), target)
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise FeatureMismatch(
            f"column {key!r} holds {array.type}, not lists of annotation rows",
            where=key,
            hint="language columns hold, per frame, a list of {role, content, style, ...} rows",
        )
    values = array.values
    offsets = array.offsets.cast(pa.int32())
    if len(array) and array.offset:
        values = values.slice(0, int(array.offsets[-1].as_py()))
    rows = _rows(values, key)
    return pa.ListArray.from_arrays(offsets, rows, type=target, mask=array.is_null())


def _rows(values: pa.Array, key: str) -> pa.StructArray:
    struct = values if pa.types.is_struct(values.type) else None
    names = {struct.type.field(i).name for i in range(struct.type.num_fields)} if struct else set()
    children = []
    for name in row_fields(key):
        child = struct.field(name) if struct is not None and name in names else None
        if name == "tool_calls":
            children.append(_tool_calls(child, len(values)))
        elif child is None:
            children.append(pa.nulls(len(values), _field_type(name, stored=False)))
        else:
            children.append(child.cast(_field_type(name, stored=False)))
    mask = values.is_null() if struct is not None else None
    return pa.StructArray.from_arrays(children, fields=list(row_type(key)), mask=mask)


def _tool_calls(child: pa.Array | None, size: int) -> pa.Array:
    target = pa.list_(_JSON)
    if child is None or pa.types.is_null(child.type):
        return pa.nulls(size, target)
    if pa.types.is_list(child.type) or pa.types.is_large_list(child.type):
        calls = child.values
        if child.offset:
            calls = calls.slice(0, int(child.offsets[-1].as_py()))
        if calls.type == _JSON:
            text = calls
        elif pa.types.is_string(calls.type) or pa.types.is_large_string(calls.type):
            text = pa.ExtensionArray.from_storage(_JSON, calls.cast(pa.string()))
        else:  # nested structs inferred from the calls' dicts: written back as JSON text
            dumped = [None if c is None else json.dumps(c) for c in calls.to_pylist()]
            text = pa.ExtensionArray.from_storage(_JSON, pa.array(dumped, pa.string()))
        offsets = child.offsets.cast(pa.int32())
        return pa.ListArray.from_arrays(offsets, text, type=target, mask=child.is_null())
    # One JSON value per row instead of a list: a list of that one value.
    wrapped = [None if c is None else [json.dumps(c)] for c in child.to_pylist()]
    storage = pa.array(wrapped, pa.list_(pa.string()))
    return _tool_calls(storage, size)


def item_rows(value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """A canonical cell's Python value as LeRobot returns it: `tool_calls` JSON decoded."""
    if value is None:
        return None
    for row in value:
        calls = row.get("tool_calls")
        if calls is not None:
            row["tool_calls"] = [c if not isinstance(c, str) else json.loads(c) for c in calls]
    return value


def to_arrow(values: Sequence[Sequence[Mapping[str, Any]] | None], key: str) -> pa.Array:
    """Per frame a list of annotation rows (dicts; None: no list) as the canonical column."""
    fields = row_fields(key)
    cells: list[list[dict[str, Any]] | None] = []
    for frame in values:
        if frame is None:
            cells.append(None)
            continue
        rows = []
        for row in frame:
            out = {name: row.get(name) for name in fields}
            calls = out.get("tool_calls")
            if calls is not None:
                out["tool_calls"] = [json.dumps(c) if not isinstance(c, str) else c for c in calls]
            rows.append(out)
        cells.append(rows)
    stored = pa.array(cells, pa.list_(row_type(key, stored=True)))
    return canonical(stored, key)


def canonical_table(table: pa.Table, meta: DatasetMeta) -> pa.Table:
    """`table` with its language columns cast to the canonical type (files written by LeRobot's
    annotation tool and by rlctl then concatenate)."""
    for position, name in enumerate(table.column_names):
        spec = meta.features.get(name)
        if spec is not None and spec.is_language:
            column = canonical(table.column(position), name)
            table = table.set_column(position, pa.field(name, column.type), column)
    return table


def check_rows_of(key: str, spec: FeatureSpec, value: Any) -> list[dict[str, Any]]:
    """`FrameValidator`'s check of a language column's value."""
    return check_rows(key, value)


def check_rows(key: str, value: Any) -> list[dict[str, Any]]:
    """One frame's value of a language column, checked: a list of rows (None: no rows)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise FeatureMismatch(
            f"expected a list of annotation rows, got {type(value).__name__}",
            where=f"frame[{key!r}]",
            hint="give a list of {role, content, style, ...} dicts (or None)",
        )
    fields = set(row_fields(key))
    checked = []
    for position, row in enumerate(value):
        if not isinstance(row, Mapping) or not isinstance(row.get("role"), str):
            raise FeatureMismatch(
                f"row {position} is not an annotation row with a string 'role'",
                where=f"frame[{key!r}]",
                hint=f"each row is a dict of {sorted(fields)}",
            )
        unknown = sorted(set(row) - fields)
        if unknown:
            raise FeatureMismatch(
                f"row {position} has fields {unknown} the column does not hold",
                where=f"frame[{key!r}]",
                hint=f"a {key} row holds {list(row_fields(key))}",
            )
        if key == LANGUAGE_PERSISTENT and not isinstance(row.get("timestamp"), (int, float)):
            raise FeatureMismatch(
                f"row {position} has no numeric 'timestamp' (seconds into the episode)",
                where=f"frame[{key!r}]",
                hint="persistent rows say when they start to hold",
            )
        checked.append(dict(row))
    return checked
