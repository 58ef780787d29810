"""The schema of a dataset: one `FeatureSpec` per key, as LeRobot's `features` in `meta/info.json`.

`FeatureSpec.from_info` / `to_info` convert losslessly: every key LeRobot writes (dtype, shape,
names, the video `info` block) and any key it may add later is kept.
"""

from __future__ import annotations

import copy
import enum
import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rlctl.domain.depth import is_depth_map
from rlctl.domain.errors import ConfigError, InvalidInput

VISUAL_DTYPES = frozenset({"image", "video"})
NUMERIC_DTYPES = frozenset(
    {
        "float16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
    }
)
STRING_DTYPES = frozenset({"string", "str"})
# LeRobot 0.6.1's annotation columns (`language_persistent`, `language_events`): lists of rows.
LANGUAGE_DTYPE = "language"
# Columns every LeRobot frame carries; they are bookkeeping, not inputs of a policy.
DEFAULT_FEATURE_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


class FeatureKind(enum.StrEnum):
    STATE = "state"
    ACTION = "action"
    VISUAL = "visual"
    ENV = "env"
    REWARD = "reward"
    LANGUAGE = "language"
    INDEX = "index"
    OTHER = "other"


def _kind_of(key: str, dtype: str) -> FeatureKind:
    if dtype in VISUAL_DTYPES or key.startswith("observation.image"):
        return FeatureKind.VISUAL
    if key in DEFAULT_FEATURE_KEYS:
        return FeatureKind.INDEX
    if key == "action" or key.startswith("action."):
        return FeatureKind.ACTION
    if key == "observation.environment_state":
        return FeatureKind.ENV
    if key.startswith("observation."):
        return FeatureKind.STATE
    if key.startswith("next.reward") or key == "reward":
        return FeatureKind.REWARD
    if dtype in STRING_DTYPES or dtype == LANGUAGE_DTYPE or key in {"task", "language_instruction"}:
        return FeatureKind.LANGUAGE
    return FeatureKind.OTHER


def _dims(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


def _shape(value: Any, key: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,)
    try:
        shape = tuple(int(v) for v in value)
    except (TypeError, ValueError) as err:
        raise InvalidInput(
            f"feature shape must be a list of integers, got {value!r}",
            where=f"features.{key}.shape",
            hint="write the shape as in LeRobot's info.json, e.g. [6] or [480, 640, 3]",
        ) from err
    if any(v < 0 for v in shape):
        raise InvalidInput(f"feature shape has a negative size: {shape}", where=f"features.{key}")
    return shape


@attrs.frozen(eq=False)
class FeatureSpec:
    """One feature: `names` is kept as LeRobot wrote it (list, dict of lists, or None)."""

    key: str
    dtype: str
    shape: tuple[int, ...] = attrs.field(converter=_dims)
    names: Any = None
    info: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    # The kind a policy or env config declares (LeRobot's `{"type": "STATE", "shape": [6]}`);
    # None derives it from the key and dtype, as a dataset's features are read.
    declared_kind: FeatureKind | None = attrs.field(default=None, kw_only=True)

    @property
    def kind(self) -> FeatureKind:
        if self.declared_kind is not None:
            return self.declared_kind
        return _kind_of(self.key, self.dtype)

    @property
    def policy_type(self) -> str:
        """LeRobot's `FeatureType` name of this feature: STATE, VISUAL, ENV, ACTION …"""
        return self.kind.value.upper()

    @property
    def is_visual(self) -> bool:
        return self.dtype in VISUAL_DTYPES

    @property
    def is_video(self) -> bool:
        return self.dtype == "video"

    @property
    def is_image(self) -> bool:
        return self.dtype == "image"

    @property
    def is_depth_map(self) -> bool:
        """A depth camera: `is_depth_map` in its `info`, as LeRobot marks one."""
        legacy = self.extra.get("video_info")
        return self.is_visual and is_depth_map(
            self.info, legacy if isinstance(legacy, Mapping) else None
        )

    @property
    def is_string(self) -> bool:
        return self.dtype in STRING_DTYPES

    @property
    def is_language(self) -> bool:
        """An annotation column: each row a list of language rows (see `rlctl.domain.language`)."""
        return self.dtype == LANGUAGE_DTYPE

    @property
    def is_numeric(self) -> bool:
        return not (self.is_visual or self.is_string or self.is_language)

    @property
    def hwc(self) -> tuple[int, int, int]:
        """(height, width, channels) of a visual feature, whatever order `names` declares."""
        if not self.is_visual or len(self.shape) != 3:
            raise InvalidInput(f"{self.key} is not an image feature of rank 3", where=self.key)
        names = list(self.names) if isinstance(self.names, (list, tuple)) else None
        if names and set(names) >= {"height", "width", "channels"}:
            dims = dict(zip(names, self.shape))
            return dims["height"], dims["width"], dims["channels"]
        if self.shape[0] in (1, 3, 4) and self.shape[-1] not in (1, 3, 4):
            return self.shape[1], self.shape[2], self.shape[0]
        return self.shape[0], self.shape[1], self.shape[2]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FeatureSpec):
            return NotImplemented
        return (
            self.to_info() == other.to_info() and self.key == other.key and self.kind == other.kind
        )

    def __hash__(self) -> int:
        return hash((self.key, self.dtype, self.shape))

    @classmethod
    def from_info(cls, key: str, entry: Mapping[str, Any]) -> FeatureSpec:
        if not isinstance(entry, Mapping):
            raise InvalidInput(
                f"feature must be a mapping with dtype and shape, got {type(entry).__name__}",
                where=f"features.{key}",
            )
        missing = [k for k in ("dtype", "shape") if k not in entry]
        if missing:
            raise InvalidInput(
                f"feature lacks {', '.join(missing)}",
                where=f"features.{key}",
                hint="each feature in info.json needs at least 'dtype' and 'shape'",
            )
        extra = {k: copy.deepcopy(v) for k, v in entry.items() if k not in _KNOWN_KEYS}
        info = entry.get("info")
        if "info" in entry and info is None:
            extra["info"] = None  # an explicit null is kept, so writing back is lossless
        return cls(
            key=key,
            dtype=str(entry["dtype"]),
            shape=_shape(entry["shape"], key),
            names=copy.deepcopy(entry.get("names")),
            info=copy.deepcopy(dict(info)) if info is not None else None,
            extra=extra,
        )

    def to_info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dtype": self.dtype,
            "shape": list(self.shape),
            "names": copy.deepcopy(self.names),
        }
        if self.info is not None:
            out["info"] = copy.deepcopy(dict(self.info))
        out.update(copy.deepcopy(dict(self.extra)))
        return out

    def with_info(self, info: Mapping[str, Any] | None) -> FeatureSpec:
        return attrs.evolve(self, info=info)


_KNOWN_KEYS = frozenset({"dtype", "shape", "names", "info"})


def features_from_info(features: Mapping[str, Mapping[str, Any]]) -> dict[str, FeatureSpec]:
    """Parse the `features` mapping of `meta/info.json`, keeping its order."""
    if not isinstance(features, Mapping):
        raise InvalidInput("'features' must be a mapping of key to feature", where="features")
    return {key: FeatureSpec.from_info(key, entry) for key, entry in features.items()}


def features_to_info(features: Mapping[str, FeatureSpec]) -> dict[str, dict[str, Any]]:
    return {key: spec.to_info() for key, spec in features.items()}


def visual_keys(features: Mapping[str, FeatureSpec]) -> list[str]:
    return [k for k, f in features.items() if f.is_visual]


def video_keys(features: Mapping[str, FeatureSpec]) -> list[str]:
    return [k for k, f in features.items() if f.is_video]


# LeRobot's FeatureType names, as a policy's or an env's config.json holds them.
TYPED_KINDS = {
    "STATE": FeatureKind.STATE,
    "VISUAL": FeatureKind.VISUAL,
    "ENV": FeatureKind.ENV,
    "ACTION": FeatureKind.ACTION,
    "REWARD": FeatureKind.REWARD,
    "LANGUAGE": FeatureKind.LANGUAGE,
}
_CHANNELS_FIRST = ("channels", "height", "width")
_CHANNELS_LAST = ("height", "width", "channels")


def typed_kind(value: str | FeatureKind) -> FeatureKind:
    """`"STATE"` (LeRobot's spelling) or `FeatureKind.STATE` → `FeatureKind.STATE`."""
    kind = TYPED_KINDS.get(str(value).upper())
    if kind is None:
        raise ConfigError(
            f"unknown feature type {value!r}", hint=f"known types: {', '.join(TYPED_KINDS)}"
        )
    return kind


def typed_feature(
    type: str | FeatureKind,
    shape: Any,
    key: str = "",
    *,
    channels_last: bool = False,
) -> FeatureSpec:
    """A feature declared by its kind and shape, as policy and env configs write them.

    Images are channels-first `(C, H, W)` in a policy's config and channels-last `(H, W, C)` in
    an env's, as in LeRobot; `names` records which, so `hwc` reads either.
    """
    kind = typed_kind(type)
    dims = _shape(shape, key or str(type))
    if kind is FeatureKind.VISUAL:
        names: Any = list(_CHANNELS_LAST if channels_last else _CHANNELS_FIRST)
        return FeatureSpec(key, "video", dims, names=names, declared_kind=kind)
    dtype = "string" if kind is FeatureKind.LANGUAGE else "float32"
    return FeatureSpec(key, dtype, dims, declared_kind=kind)


def typed_feature_data(spec: FeatureSpec) -> dict[str, Any]:
    """`{"type": "STATE", "shape": [6]}`: a feature as a LeRobot config.json holds it."""
    return {"type": spec.policy_type, "shape": list(spec.shape)}


def typed_features(
    value: Mapping[str, Any] | None, *, channels_last: bool = False
) -> dict[str, FeatureSpec]:
    """A config's `{key: {"type", "shape"}}` mapping (or features already built) as specs keyed
    by their mapping key."""
    if value is None:
        return {}
    out: dict[str, FeatureSpec] = {}
    for key, feature in value.items():
        if isinstance(feature, FeatureSpec):
            out[key] = feature if feature.key == key else attrs.evolve(feature, key=key)
            continue
        if not isinstance(feature, Mapping) or set(feature) != {"type", "shape"}:
            raise ConfigError(
                f"a feature is written {{'type': ..., 'shape': [...]}}, got {feature!r}",
                where=key,
            )
        out[key] = typed_feature(
            feature["type"], feature["shape"], key, channels_last=channels_last
        )
    return out


def dimension_names(spec: FeatureSpec) -> tuple[str, ...]:
    """A name per dimension: LeRobot writes `names` as a list, a dict of lists (one list per
    axis, e.g. `{"motors": [...]}`), or null; missing names become `key[i]`."""
    size = math.prod(spec.shape) if spec.shape else 1
    names: list[str] = []
    raw = spec.names
    if isinstance(raw, Mapping):
        lists = [v for v in raw.values() if isinstance(v, (list, tuple))]
        raw = lists[0] if len(lists) == 1 else [n for v in lists for n in v]
    if isinstance(raw, (list, tuple)) and all(isinstance(n, str) for n in raw):
        names = list(raw)
    if len(names) != size:
        names = [f"{spec.key}[{i}]" for i in range(size)] if size > 1 else [spec.key]
    return tuple(names)
