"""The schema of a dataset: one `FeatureSpec` per key, as LeRobot's `features` in `meta/info.json`.

`FeatureSpec.from_info` / `to_info` convert losslessly: every key LeRobot writes (dtype, shape,
names, the video `info` block) and any key it may add later is kept.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from typing import Any

import attrs

from rlctl.domain.depth import is_depth_map
from rlctl.domain.errors import InvalidInput

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
    if dtype in STRING_DTYPES or key in {"task", "language_instruction"}:
        return FeatureKind.LANGUAGE
    return FeatureKind.OTHER


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
    shape: tuple[int, ...] = attrs.field(converter=tuple)
    names: Any = None
    info: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def kind(self) -> FeatureKind:
        return _kind_of(self.key, self.dtype)

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
        return self.to_info() == other.to_info() and self.key == other.key

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
