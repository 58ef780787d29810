"""Whether datasets can share one set of files: same fps, same features.

As LeRobot's `features_equal_for_merge`: features must agree in dtype, shape and names, and a
video's stream (codec, size, pixel format) must agree; the encoder settings recorded beside it
(g, crf, preset, ...) may differ: they describe how frames were made, not what they are. When they
differ, the merged feature keeps a setting only where every source agrees (null otherwise).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from rlctl.application.ports.dataset_tools import FeatureChanges
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.features import FeatureSpec

# Keys of a video feature's `info` that record encoder settings (LeRobot's VIDEO_ENCODER_INFO_KEYS).
ENCODER_INFO_KEYS = frozenset(
    f"video.{name}"
    for name in ("g", "crf", "preset", "fast_decode", "extra_options", "video_backend")
)
# Keys some writers add to a feature that say nothing about its values (LeRobot's v2.1 -> v3.0
# conversion copies the dataset's fps into each feature).
_IGNORED_FEATURE_KEYS = frozenset({"fps"})


def _comparable(spec: FeatureSpec) -> dict[str, Any]:
    entry = {k: v for k, v in spec.to_info().items() if k not in _IGNORED_FEATURE_KEYS}
    info = entry.get("info")
    if isinstance(info, Mapping):
        entry["info"] = {k: v for k, v in info.items() if k not in ENCODER_INFO_KEYS}
    if not spec.is_video:
        entry.pop("info", None)
    return entry


def feature_differences(
    first: Mapping[str, FeatureSpec], other: Mapping[str, FeatureSpec]
) -> list[str]:
    """One line per difference between two feature sets; empty when they can be merged."""
    lines: list[str] = []
    missing = [k for k in first if k not in other]
    extra = [k for k in other if k not in first]
    if missing:
        lines.append(f"lacks feature(s) {', '.join(missing)}")
    if extra:
        lines.append(f"has extra feature(s) {', '.join(extra)}")
    for key in first:
        if key not in other:
            continue
        a, b = _comparable(first[key]), _comparable(other[key])
        for field in dict.fromkeys([*a, *b]):
            if a.get(field) != b.get(field):
                lines.append(f"{key}.{field}: {a.get(field)!r} vs {b.get(field)!r}")
    return lines


def dataset_differences(first: DatasetMeta, other: DatasetMeta) -> list[str]:
    """What keeps `other` from sharing files with `first` (fps and features)."""
    lines = []
    if first.fps != other.fps:
        lines.append(f"fps: {first.fps} vs {other.fps}")
    return lines + feature_differences(first.features, other.features)


def merged_features(metas: Sequence[DatasetMeta]) -> dict[str, FeatureSpec]:
    """The first dataset's features, each video's encoder settings kept only where all agree."""
    merged = dict(metas[0].features)
    for key, spec in merged.items():
        if not spec.is_video:
            continue
        infos = [dict(m.features[key].info or {}) for m in metas if key in m.features]
        base = copy.deepcopy(infos[0])
        for name in ENCODER_INFO_KEYS:
            values = [info.get(name) for info in infos]
            if any(v != values[0] for v in values[1:]):
                base[name] = {} if name == "video.extra_options" else None
        merged[key] = spec.with_info(base)
    return merged


def edited_differences(
    template: DatasetMeta, source: DatasetMeta, changes: FeatureChanges | None
) -> list[str]:
    """What keeps `source` from becoming `template` by `changes` (fps and features)."""
    if changes is None or changes.empty:
        return dataset_differences(template, source)
    lines = [f"fps: {template.fps} vs {source.fps}"] if template.fps != source.fps else []
    lacking = [
        k
        for k in (*changes.removed, *changes.encoded, *changes.cropped)
        if k not in source.features
    ]
    if lacking:
        lines.append(f"lacks feature(s) {', '.join(lacking)}")
    present = [k for k in changes.added if k in source.features]
    if present:
        lines.append(f"already has feature(s) {', '.join(present)}")
    skipped = {*changes.removed, *changes.added, *changes.encoded, *changes.cropped}
    expected = {k: v for k, v in template.features.items() if k not in skipped}
    have = {k: v for k, v in source.features.items() if k not in skipped}
    lines += feature_differences(expected, have)
    for key in changes.encoded:
        old, new = source.features.get(key), template.features.get(key)
        if old is None or new is None:
            continue
        if not old.is_visual or old.shape != new.shape:
            lines.append(f"{key}: a {old.dtype} of shape {list(old.shape)} is no camera to encode")
    for key in changes.cropped:
        old = source.features.get(key)
        if old is not None and not old.is_visual:
            lines.append(f"{key}: a {old.dtype} is no camera to crop")
    return lines
