"""A dataset's data rows as a Hugging Face `datasets.Dataset`, LeRobot's `dataset.hf_dataset`.

LeRobot users reach for `hf_dataset` to filter, select, map or look at rows with pandas. LeRobot
builds it by converting the parquet files into Arrow files in the Hugging Face cache; here it is
made from the rows the reader already holds: its numpy columns become Arrow arrays over the same
memory (a column is copied only where the stored dtype is not the one the reader keeps, e.g.
float64 data the reader reads as float32), image and text columns are the reader's Arrow arrays.
Nothing is written to disk.

The features are LeRobot's (`get_hf_features_from_features`): a value of shape (1,) is a
`Value`, a vector a fixed-length `List`, an image an `Image`, and videos have no column. Rows
come out as LeRobot gives them (`hf_transform_to_torch`): tensors, images as float CHW tensors
in [0, 1], text as str.
"""

from __future__ import annotations

from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import torch
from PIL import Image as PILImage
from torchvision.transforms.functional import pil_to_tensor

from rlctl.adapters.storage.lerobot_v3.table import FrameTable, stored_columns
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.features import FeatureSpec

# Depth maps stored as 16-bit PNGs: LeRobot gives them in their own units, not scaled to [0, 1].
_UINT16_MODES = frozenset({"I;16", "I;16B", "I;16L", "I;16N", "I"})


def hf_dataset(table: FrameTable, meta: DatasetMeta) -> datasets.Dataset:
    """The rows of `table` (a reader's) as a `datasets.Dataset` with LeRobot's features."""
    columns: dict[str, pa.Array] = {}
    features: dict[str, Any] = {}
    for key in stored_columns(meta):
        spec = meta.features.get(key) or FeatureSpec(key=key, dtype="int64", shape=(1,))
        if key in table.numeric:
            columns[key] = _numeric_array(table.numeric[key], spec)
            features[key] = _numeric_feature(spec)
        elif key in table.arrow:
            columns[key] = table.arrow[key]
            features[key] = (
                datasets.Image()
                if spec.is_image
                else datasets.Features.from_arrow_schema(
                    pa.schema([pa.field(key, table.arrow[key].type)])
                )[key]
            )
    hf_features = datasets.Features(features)
    arrow = pa.Table.from_arrays(list(columns.values()), schema=hf_features.arrow_schema)
    rows = datasets.Dataset(
        datasets.table.InMemoryTable(arrow), info=datasets.DatasetInfo(features=hf_features)
    )
    rows.set_transform(to_torch)
    return rows


def to_torch(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """LeRobot's `hf_transform_to_torch`: images to float CHW tensors, the rest to tensors,
    strings, nested rows (language annotations) and missing values as they are."""
    for key, values in batch.items():
        first = values[0] if values else None
        if isinstance(first, PILImage.Image):
            batch[key] = [_image_tensor(image) for image in values]
        elif first is None or (isinstance(first, (dict, list)) and _is_rows(first)):
            continue
        else:
            batch[key] = [v if isinstance(v, str) else torch.tensor(v) for v in values]
    return batch


def _is_rows(value: dict[str, Any] | list[Any]) -> bool:
    return isinstance(value, dict) or (bool(value) and isinstance(value[0], dict))


def _image_tensor(image: PILImage.Image) -> torch.Tensor:
    if image.mode in _UINT16_MODES:
        return torch.from_numpy(np.array(image, dtype=np.float32))[None, ...]
    if image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    return pil_to_tensor(image).float().div_(255)


def _numeric_array(values: np.ndarray, spec: FeatureSpec) -> pa.Array:
    stored = np.dtype(spec.dtype) if _is_numeric_dtype(spec.dtype) else values.dtype
    flat = values.astype(stored, copy=False).reshape(-1)
    array: pa.Array = pa.array(flat)
    if tuple(spec.shape) != (1,):
        for size in reversed(spec.shape):
            array = pa.FixedSizeListArray.from_arrays(array, int(size))
    return array


def _numeric_feature(spec: FeatureSpec) -> Any:
    dtype = spec.dtype if _is_numeric_dtype(spec.dtype) else "int64"
    feature: Any = datasets.Value(dtype)
    if tuple(spec.shape) != (1,):
        for size in reversed(spec.shape):
            feature = datasets.List(feature, length=int(size))
    return feature


def _is_numeric_dtype(name: str) -> bool:
    try:
        kind = np.dtype(name).kind
    except TypeError:
        return False
    return kind in "biuf"
