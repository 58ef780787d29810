"""RemoveFeatures and AddFeatures: a dataset with features left out, or with new ones.

LeRobot's `remove_feature` / `add_features` (`lerobot.datasets.dataset_tools`), with its rules:
a removed feature must exist and may not be one of the index columns every dataset has; an added
one must not exist yet, and needs a dtype and a shape. Removing a camera drops its videos;
statistics of what remains are kept, and an added feature's are computed from its values.

With an output folder the source is left as it is; without one the dataset is edited in place,
safely (rebuilt beside the original under the dataset's lock, then swapped in).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import numpy as np

from rlctl.application.ports.dataset_tools import (
    EpisodeEdit,
    EpisodeRef,
    FeatureChanges,
)
from rlctl.application.use_cases.dataset_rebuild import (
    DatasetTool,
    EditRequest,
    EditResult,
    edit_dataset,
)
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import InvalidInput, NotSupported
from rlctl.domain.features import FeatureSpec

# Columns every LeRobot dataset has (LeRobot's `required_features`).
REQUIRED_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


class RemoveFeatures(DatasetTool):
    def __call__(
        self,
        location: str,
        features: str | Iterable[str],
        output: str | None = None,
        *,
        force: bool = False,
    ) -> EditResult:
        names = tuple(dict.fromkeys(_names(features)))
        if not names:
            raise InvalidInput(
                "no feature to remove", where="--feature", hint="name at least one feature"
            )
        if output is None:
            with self._folders.lock(location):
                return self._remove(location, names, output, force)
        return self._remove(location, names, output, force)

    def _remove(
        self, location: str, names: tuple[str, ...], output: str | None, force: bool
    ) -> EditResult:
        meta = self._meta_reader.read_meta(location)
        missing = [n for n in names if n not in meta.features]
        if missing:
            raise InvalidInput(
                f"the dataset has no feature {', '.join(repr(n) for n in missing)}",
                where=location,
                hint=f"its features: {', '.join(meta.features)}",
            )
        required = [n for n in names if n in REQUIRED_FEATURES]
        if required:
            raise InvalidInput(
                f"{', '.join(repr(n) for n in required)} cannot be removed: every dataset has "
                f"{', '.join(REQUIRED_FEATURES)}",
                where="--feature",
                hint="remove other features",
            )
        features = {k: v for k, v in meta.features.items() if k not in names}
        return edit_dataset(
            self._rebuilder,
            self._folders,
            self._progress,
            location=location,
            output=output,
            template=attrs.evolve(meta, features=features),
            refs=[EpisodeRef(location, i) for i in range(meta.total_episodes)],
            description=f"copying episodes without {', '.join(names)}",
            changes=FeatureChanges(removed=names),
            request=EditRequest.of("remove-feature", meta, force, features=list(names)),
        )


# What `AddFeatures` takes per feature: (values, feature) where values has one row per frame of
# the dataset, in index order, and feature is a `FeatureSpec` or LeRobot's info.json entry.
AddedFeature = tuple[Any, FeatureSpec | Mapping[str, Any]]


class AddFeatures(DatasetTool):
    def __call__(
        self,
        location: str,
        features: Mapping[str, AddedFeature],
        output: str | None = None,
        *,
        force: bool = False,
    ) -> EditResult:
        """`features`: name -> (values, {"dtype": ..., "shape": [...], "names": ...}), values
        an array (or anything `numpy.asarray` takes) of `(total_frames, *shape)`; for shape
        `[1]`, `(total_frames,)` too."""
        if not features:
            raise InvalidInput("no feature to add", where=location, hint="give at least one")
        if output is None:
            with self._folders.lock(location):
                return self._add(location, features, output, force)
        return self._add(location, features, output, force)

    def _add(
        self,
        location: str,
        features: Mapping[str, AddedFeature],
        output: str | None,
        force: bool,
    ) -> EditResult:
        meta = self._meta_reader.read_meta(location)
        specs: dict[str, FeatureSpec] = {}
        values: dict[str, np.ndarray] = {}
        for name, entry in features.items():
            spec, array = _added_feature(meta, name, entry)
            specs[name], values[name] = spec, array
        edits = [
            EpisodeEdit(
                columns={
                    name: array[record.dataset_from_index : record.dataset_to_index]
                    for name, array in values.items()
                }
            )
            for record in meta.episodes
        ]
        return edit_dataset(
            self._rebuilder,
            self._folders,
            self._progress,
            location=location,
            output=output,
            template=attrs.evolve(meta, features={**meta.features, **specs}),
            refs=[EpisodeRef(location, i) for i in range(meta.total_episodes)],
            description=f"copying episodes with {', '.join(specs)}",
            changes=FeatureChanges(added=tuple(specs)),
            edits=edits,
            request=EditRequest.of(
                "add-feature",
                meta,
                force,
                features={name: _digest(values[name]) for name in sorted(specs)},
            ),
        )


def _digest(values: np.ndarray) -> str:
    if values.dtype.kind in "UO":
        data = "\x00".join(map(str, values.tolist())).encode()
    else:
        data = np.ascontiguousarray(values).tobytes()
    return hashlib.sha256(data).hexdigest()[:16]


def _added_feature(meta: DatasetMeta, name: str, entry: Any) -> tuple[FeatureSpec, np.ndarray]:
    where = f"features[{name!r}]"
    if not isinstance(entry, (tuple, list)) or len(entry) != 2:
        raise InvalidInput(
            "each added feature is a pair (values, feature info)",
            where=where,
            hint='e.g. {"reward": (rewards, {"dtype": "float32", "shape": [1], "names": None})}',
        )
    raw, info = entry
    if name in meta.features:
        raise InvalidInput(
            f"feature {name!r} already exists in the dataset",
            where=where,
            hint="choose a new name, or remove the feature first",
        )
    if isinstance(info, FeatureSpec):
        spec = attrs.evolve(info, key=name)
    else:
        if not isinstance(info, Mapping) or not {"dtype", "shape"} <= set(info):
            raise InvalidInput(
                "the feature info must contain 'dtype' and 'shape'",
                where=where,
                hint='e.g. {"dtype": "float32", "shape": [1], "names": None}',
            )
        spec = FeatureSpec.from_info(name, info)
    if spec.is_visual or spec.is_language:
        raise NotSupported(
            f"rlctl adds numeric and string features, not {spec.dtype!r} ones",
            where=where,
            hint="record cameras with the dataset; add per-frame values as numbers",
        )
    return spec, _values(raw, spec, meta.total_frames, where)


def _values(raw: Any, spec: FeatureSpec, frames: int, where: str) -> np.ndarray:
    array = np.asarray(raw)
    if spec.is_string:
        if array.shape != (frames,) or array.dtype.kind not in "UO":
            raise InvalidInput(
                f"a string feature needs {frames} strings, got an array of shape "
                f"{list(array.shape)} ({array.dtype})",
                where=where,
            )
        return array
    try:
        target = np.dtype(spec.dtype)
    except TypeError as err:
        raise InvalidInput(f"unknown dtype {spec.dtype!r}", where=where) from err
    expected = (frames, *spec.shape)
    if array.shape == (frames,) and spec.shape == (1,):
        array = array.reshape(expected)
    if array.shape != expected:
        raise InvalidInput(
            f"the values have shape {list(array.shape)}; the dataset has {frames} frames and "
            f"the feature's shape is {list(spec.shape)}, so {list(expected)} is needed",
            where=where,
            hint="give one value per frame, in the dataset's index order",
        )
    if not np.can_cast(array.dtype, target, casting="same_kind"):
        raise InvalidInput(
            f"values of dtype {array.dtype} cannot be stored as {spec.dtype} without loss",
            where=where,
            hint=f"convert them first (values.astype({spec.dtype!r})) or change the dtype",
        )
    return array.astype(target, copy=False)
