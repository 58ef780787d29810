"""Writing the rows of episodes into `data/chunk-XXX/file-YYY.parquet`.

The table layout is LeRobot's: the non-video features in order, then timestamp, frame_index,
episode_index, index and task_index; vectors as fixed-size lists, numeric features of rank 2 to 5
as nested lists tagged as `datasets`' ArrayND extension types, images as `{bytes, path}` PNG
structs; the `huggingface` schema metadata that lets `datasets` rebuild the features; one row group
per episode. Appending rewrites the current file under a temporary name and renames it over the
old one, so the file on disk is always complete (a parquet file cannot grow in place: its index
is at its end).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rlctl.adapters.storage.lerobot_v3 import language_columns
from rlctl.adapters.storage.lerobot_v3.atomic_files import write_atomic
from rlctl.adapters.storage.lerobot_v3.meta_writer import next_file
from rlctl.domain.errors import NotSupported
from rlctl.domain.features import FeatureSpec

IMAGE_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
# `datasets` has Array2D to Array5D; LeRobot refuses a numeric feature of higher rank.
_MAX_ARRAY_RANK = 5


def _arrow_type(spec: FeatureSpec) -> pa.DataType:
    if spec.is_image:
        return IMAGE_STRUCT
    if spec.is_string:
        return pa.string()
    if spec.is_language:
        return language_columns.arrow_type(spec.key)
    scalar = pa.from_numpy_dtype(np.dtype(spec.dtype))
    if spec.shape in ((), (1,)):
        return scalar
    if len(spec.shape) == 1:
        return pa.list_(scalar, spec.shape[0])
    if len(spec.shape) > _MAX_ARRAY_RANK:
        raise NotSupported(
            f"numeric feature of shape {list(spec.shape)}: LeRobot datasets hold numeric "
            f"features of rank {_MAX_ARRAY_RANK} at most, this one has rank {len(spec.shape)}",
            where=f"features.{spec.key}",
            hint="merge some of its dimensions, e.g. shape ["
            + str(int(np.prod(spec.shape[: -_MAX_ARRAY_RANK + 1])))
            + ", "
            + ", ".join(str(v) for v in spec.shape[-_MAX_ARRAY_RANK + 1 :])
            + "]",
        )
    # `datasets`' ArrayND storage: lists of lists of unstated length (not fixed-size lists).
    kind = scalar
    for _ in spec.shape:
        kind = pa.list_(kind)
    return kind


def _array_extension(spec: FeatureSpec) -> dict[bytes, bytes] | None:
    """The field metadata by which pyarrow restores `datasets`' `ArrayNDExtensionType`."""
    if not spec.is_numeric or len(spec.shape) < 2:
        return None
    name = f"datasets.features.features.Array{len(spec.shape)}DExtensionType"
    return {
        b"ARROW:extension:metadata": json.dumps([list(spec.shape), spec.dtype]).encode(),
        b"ARROW:extension:name": name.encode(),
    }


def _field(spec: FeatureSpec) -> pa.Field:
    return pa.field(spec.key, _arrow_type(spec), metadata=_array_extension(spec))


def _hf_feature(spec: FeatureSpec) -> dict[str, Any]:
    """The `datasets` feature that LeRobot's `get_hf_features_from_features` declares."""
    if spec.is_image:
        return {"_type": "Image"}
    if spec.is_string:
        return {"dtype": "string", "_type": "Value"}
    if spec.is_language:
        return language_columns.hf_feature(spec.key)
    value = {"dtype": spec.dtype, "_type": "Value"}
    if spec.shape in ((), (1,)):
        return value
    if len(spec.shape) >= 2:
        return {
            "shape": list(spec.shape),
            "dtype": spec.dtype,
            "_type": f"Array{len(spec.shape)}D",
        }
    return {"feature": value, "length": spec.shape[0], "_type": "List"}


def check_writable(features: Mapping[str, FeatureSpec]) -> None:
    """Raise `NotSupported` now, at create time, for a feature the data file cannot hold."""
    for spec in features.values():
        if not spec.is_video:
            _arrow_type(spec)


class DataTableBuilder:
    """Turns one episode's columns into the Arrow table of its rows."""

    def __init__(self, features: Mapping[str, FeatureSpec]) -> None:
        self.specs = {k: f for k, f in features.items() if not f.is_video}
        hf_features = {k: _hf_feature(f) for k, f in self.specs.items()}
        self.schema = pa.schema(
            [_field(f) for f in self.specs.values()],
            metadata={"huggingface": json.dumps({"info": {"features": hf_features}})},
        )
        self.image_keys = [k for k, f in self.specs.items() if f.is_image]

    def build(self, columns: Mapping[str, Any]) -> pa.Table:
        """`columns`: key -> stacked array (N, ...), list of str, or PNG bytes (images)."""
        arrays = [self._column(key, spec, columns[key]) for key, spec in self.specs.items()]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def _column(self, key: str, spec: FeatureSpec, values: Any) -> pa.Array:
        kind = self.schema.field(key).type
        if spec.is_image:
            suffix = "tiff" if spec.is_depth_map else "png"  # LeRobot's names
            paths = [f"frame-{i:06d}.{suffix}" for i in range(len(values))]
            return pa.StructArray.from_arrays(
                [pa.array(values, pa.binary()), pa.array(paths, pa.string())],
                fields=list(IMAGE_STRUCT),
            )
        if spec.is_string:
            return pa.array(values, pa.string())
        if spec.is_language:
            return language_columns.to_arrow(values, key)
        array = np.ascontiguousarray(values)
        if pa.types.is_fixed_size_list(kind):
            flat = pa.array(array.reshape(-1), kind.value_type)
            return pa.FixedSizeListArray.from_arrays(flat, kind.list_size)
        if pa.types.is_list(kind):
            return _nested_lists(array.reshape(len(values), *spec.shape), kind)
        return pa.array(array.reshape(-1), kind)


def _nested_lists(array: np.ndarray, kind: pa.DataType) -> pa.Array:
    """`(rows, *shape)` values as lists of lists, innermost first, with even offsets."""
    nested: pa.Array = pa.array(array.reshape(-1), _innermost(kind))
    for axis in range(array.ndim - 1, 0, -1):
        lists = math.prod(array.shape[:axis])
        offsets = np.arange(lists + 1, dtype=np.int32) * array.shape[axis]
        nested = pa.ListArray.from_arrays(pa.array(offsets), nested)
    return nested


def _innermost(kind: pa.DataType) -> pa.DataType:
    while pa.types.is_list(kind):
        kind = kind.value_type
    return kind


class DataFileAppender:
    """Appends episode tables to the current data file, moving to a new one past the size limit.

    Rewriting copies the file's existing row groups one at a time, so memory stays at one
    episode's rows however large the file grows.
    """

    def __init__(
        self,
        root: Path,
        path_template: str,
        schema: pa.Schema,
        *,
        chunks_size: int,
        max_file_mb: float,
        dictionary_columns: Sequence[str],
        last_file: tuple[int, int] | None = None,
        durable: bool = True,
    ) -> None:
        self._root = root
        self._template = path_template
        self._schema = schema
        self._chunks_size = chunks_size
        self._max_file_bytes = max_file_mb * 1024 * 1024
        self._dictionary_columns = list(dictionary_columns)
        self._durable = durable
        self._last_file = last_file
        self._current: tuple[int, int] | None = None
        self._rows_in_current = 0

    def path(self, chunk_index: int, file_index: int) -> Path:
        return self._root / self._template.format(chunk_index=chunk_index, file_index=file_index)

    def _file_for(self, rows: int) -> tuple[int, int]:
        if self._current is None:
            return (
                (0, 0)
                if self._last_file is None
                else next_file(*self._last_file, self._chunks_size)
            )
        size = self.path(*self._current).stat().st_size
        per_row = size / self._rows_in_current if self._rows_in_current else 0
        # LeRobot's rule: start a new file when this episode would take the file past the limit.
        if size + per_row * rows >= self._max_file_bytes:
            return next_file(*self._current, self._chunks_size)
        return self._current

    def append(self, table: pa.Table) -> tuple[int, int]:
        """Write `table` as the last row group of the current file; returns its (chunk, file)."""
        target = self._file_for(table.num_rows)
        if target != self._current:
            if self._current is not None:
                self._last_file = self._current
            self._current, self._rows_in_current = target, 0
        path = self.path(*target)
        previous = path if self._rows_in_current else None
        write_atomic(path, lambda temp: self._write(temp, previous, table), self._durable)
        self._rows_in_current += table.num_rows
        return target

    def _write(self, temp: Path, previous: Path | None, table: pa.Table) -> None:
        with pq.ParquetWriter(
            temp,
            self._schema,
            compression="snappy",
            use_dictionary=self._dictionary_columns,
        ) as out:
            if previous is not None:
                committed = pq.ParquetFile(previous, memory_map=True)
                for group in range(committed.num_row_groups):
                    # Read back, a 2-D feature is `datasets`' extension type when that library
                    # is imported in this process (it registers the type): the file's type is
                    # its storage, so cast back.
                    out.write_table(committed.read_row_group(group).cast(self._schema))
            out.write_table(table, row_group_size=max(1, table.num_rows))
