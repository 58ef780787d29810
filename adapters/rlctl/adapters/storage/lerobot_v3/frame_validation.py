"""Checking one frame against the dataset's features before it enters an episode buffer.

Every value is turned into what the writer stores: numeric features into arrays of the feature's
dtype and shape, cameras into uint8 (height, width, channels), depth cameras into uint16
millimetres or float32 metres (height, width, 1), one of the two for the whole dataset. A value
that does not fit raises `FeatureMismatch` naming the key, what was expected and what came, so a
recording script fails at the first bad frame rather than with a pyarrow error at the end of an
episode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from rlctl.adapters.storage.lerobot_v3 import language_columns
from rlctl.domain.depth import depth_frame, infer_depth_unit
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.features import DEFAULT_FEATURE_KEYS, FeatureSpec
from rlctl.domain.frames import Frame

TASK_KEY = "task"

# The bookkeeping columns LeRobot adds to every dataset (`DEFAULT_FEATURES`).
_BOOKKEEPING = {
    "timestamp": FeatureSpec(key="timestamp", dtype="float32", shape=(1,)),
    "frame_index": FeatureSpec(key="frame_index", dtype="int64", shape=(1,)),
    "episode_index": FeatureSpec(key="episode_index", dtype="int64", shape=(1,)),
    "index": FeatureSpec(key="index", dtype="int64", shape=(1,)),
    "task_index": FeatureSpec(key="task_index", dtype="int64", shape=(1,)),
}
assert tuple(_BOOKKEEPING) == DEFAULT_FEATURE_KEYS


@attrs.frozen
class ValidFrame:
    """A frame that fits the features: values keyed like the features, images HWC uint8."""

    values: Mapping[str, Any]
    task: str


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__


def _mismatch(key: str, expected: str, value: Any, hint: str | None = None) -> FeatureMismatch:
    return FeatureMismatch(
        f"expected {expected}, got {_describe(value)}", where=f"frame[{key!r}]", hint=hint
    )


def _as_array(key: str, value: Any, expected: str) -> np.ndarray:
    try:
        return np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as err:
        # e.g. a CUDA tensor, or a ragged list.
        raise _mismatch(
            key, expected, value, hint="pass a numpy array (move tensors to the CPU first)"
        ) from err


def _numeric(key: str, spec: FeatureSpec, value: Any) -> np.ndarray:
    expected = f"{spec.dtype} of shape {spec.shape}"
    array = _as_array(key, value, expected)
    target = np.dtype(spec.dtype)
    if array.dtype == object or not _casts_without_surprise(array.dtype, target):
        raise _mismatch(
            key, expected, array, hint=f"convert the value with .astype({spec.dtype!r})"
        )
    if array.shape != spec.shape:
        # A scalar for a one-element feature is what a caller naturally passes.
        if array.size == 1 and int(np.prod(spec.shape)) == 1:
            array = array.reshape(spec.shape)
        else:
            raise _mismatch(key, expected, array)
    return array if array.dtype == target else array.astype(target)


def _casts_without_surprise(actual: np.dtype, target: np.dtype) -> bool:
    """float64 -> float32 and int -> float are fine; float -> int or anything -> bool is not."""
    if target.kind == "b":
        return actual.kind == "b"
    if actual.kind == "b":
        return False
    return bool(np.can_cast(actual, target, casting="same_kind"))


def _string(key: str, spec: FeatureSpec, value: Any) -> str:
    if not isinstance(value, str):
        raise _mismatch(key, "a str", value)
    return value


def _image(key: str, spec: FeatureSpec, value: Any) -> np.ndarray:
    height, width, channels = spec.hwc
    expected = (
        f"an image of shape {(height, width, channels)} (HWC) or {(channels, height, width)} (CHW),"
        " uint8 or float in [0, 1]"
    )
    array = _as_array(key, value, expected)
    if array.shape == (height, width, channels):
        pass
    elif array.shape == (channels, height, width):
        array = np.ascontiguousarray(array.transpose(1, 2, 0))
    else:
        raise _mismatch(key, expected, array)
    if array.dtype == np.uint8:
        return array
    if array.dtype.kind == "f":
        low, high = float(array.min()), float(array.max())
        if not (low >= 0.0 and high <= 1.0):
            raise FeatureMismatch(
                f"float image values must lie in [0, 1], got [{low:.3g}, {high:.3g}]",
                where=f"frame[{key!r}]",
                hint="divide uint8 pixels by 255, or pass them as uint8",
            )
        return np.rint(array * 255.0).astype(np.uint8)
    raise _mismatch(key, expected, array, hint="pass uint8 pixels, or floats in [0, 1]")


class _DepthCheck:
    """A depth map, in the unit the dataset records it in (`depth_unit`, else the first frame's:
    LeRobot records the first frame's unit and quantizes every frame in it)."""

    def __init__(self, spec: FeatureSpec) -> None:
        self.unit = (spec.info or {}).get("depth_unit")

    def __call__(self, key: str, spec: FeatureSpec, value: Any) -> np.ndarray:
        height, width, _ = spec.hwc
        array = depth_frame(key, value, height, width)
        unit = infer_depth_unit(array.dtype)
        if self.unit is None:
            self.unit = unit
        elif unit != self.unit:
            wanted = "uint16 millimetres" if self.unit == "mm" else "float32 metres"
            raise FeatureMismatch(
                f"expected a depth map in {wanted}, as the dataset records it "
                f"(depth_unit {self.unit!r}), got {array.dtype} values",
                where=f"frame[{key!r}]",
                hint=f"convert every frame to {wanted}",
            )
        return array


def _validator(spec: FeatureSpec):
    if spec.is_depth_map:
        return _DepthCheck(spec)
    if spec.is_visual:
        return _image
    if spec.is_string:
        return _string
    if spec.is_language:
        return language_columns.check_rows_of
    return _numeric


class FrameValidator:
    """Validates frames for one set of features; built once per dataset, called per frame."""

    def __init__(self, features: Mapping[str, FeatureSpec]) -> None:
        self._specs = {k: f for k, f in features.items() if k not in DEFAULT_FEATURE_KEYS}
        self._checks = {k: _validator(f) for k, f in self._specs.items()}

    def __call__(self, frame: Frame | Mapping[str, Any]) -> ValidFrame:
        values, task = _split_task(frame)
        self._check_keys(values)
        checked = {
            key: check(key, self._specs[key], values[key]) for key, check in self._checks.items()
        }
        return ValidFrame(values=checked, task=task)

    def _check_keys(self, values: Mapping[str, Any]) -> None:
        bookkeeping = sorted(k for k in values if k in DEFAULT_FEATURE_KEYS)
        if bookkeeping:
            raise FeatureMismatch(
                f"the frame sets {', '.join(bookkeeping)}, which the writer computes",
                where="frame",
                hint="leave out timestamp, frame_index, episode_index, index and task_index: "
                "timestamps are frame_index / fps",
            )
        missing = [k for k in self._specs if k not in values]
        extra = sorted(k for k in values if k not in self._specs)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            if extra:
                parts.append(f"unknown {', '.join(extra)}")
            raise FeatureMismatch(
                "the frame's keys do not match the features: " + "; ".join(parts),
                where="frame",
                hint=f"the features are: {', '.join(self._specs)} (plus 'task')",
            )


def _split_task(frame: Frame | Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    if isinstance(frame, Frame):
        values, task = frame.values, frame.task
    elif isinstance(frame, Mapping):
        if TASK_KEY not in frame:
            raise FeatureMismatch(
                "the frame has no 'task'",
                where="frame",
                hint="add the task text, e.g. frame['task'] = 'pick the cube'",
            )
        values = {k: v for k, v in frame.items() if k != TASK_KEY}
        task = frame[TASK_KEY]
    else:
        raise FeatureMismatch(
            f"a frame must be a Frame or a mapping of feature to value, got {type(frame).__name__}",
            where="frame",
        )
    if not isinstance(task, str):
        raise _mismatch(TASK_KEY, "the task as a str", task)
    return values, task


def dataset_features(
    features: Mapping[str, FeatureSpec | Mapping[str, Any]],
) -> dict[str, FeatureSpec]:
    """A new dataset's features: the user's, then LeRobot's bookkeeping columns.

    The bookkeeping columns may be listed too (LeRobot's `features` often are), but not redefined.
    """
    specs: dict[str, FeatureSpec] = {}
    for key, feature in features.items():
        spec = feature if isinstance(feature, FeatureSpec) else FeatureSpec.from_info(key, feature)
        if key in _BOOKKEEPING:
            fixed = _BOOKKEEPING[key]
            if (spec.dtype, spec.shape) != (fixed.dtype, fixed.shape):
                raise InvalidInput(
                    f"{key} is a column the writer fills ({fixed.dtype} {list(fixed.shape)}); "
                    f"it cannot be {spec.dtype} {list(spec.shape)}",
                    where=f"features.{key}",
                    hint="leave the bookkeeping columns out of the features",
                )
            continue
        if spec.is_visual:
            spec.hwc  # noqa: B018 - raises for a camera whose shape is not (H, W, C) or (C, H, W)
        if spec.is_depth_map and spec.hwc[2] != 1:
            raise InvalidInput(
                f"a depth map has one channel; {key} declares shape {list(spec.shape)}",
                where=f"features.{key}.shape",
                hint="declare depth cameras as [height, width, 1]",
            )
        specs[key] = spec
    if not specs:
        raise InvalidInput("a dataset needs at least one feature", where="features")
    return {**specs, **_BOOKKEEPING}
