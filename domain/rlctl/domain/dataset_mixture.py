"""Several datasets trained on as one (LeRobot's `MultiLeRobotDataset`): what they share, and the
one metadata a policy is built from.

Features not every dataset has, or of another dtype or shape somewhere, are left out (each
reason said once); camera storage does not matter (an image and a video camera of one shape give
the same tensors). Statistics are aggregated as LeRobot aggregates episodes' statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import DatasetError
from rlctl.domain.feature_stats import aggregate_stats, stats_from_json, stats_to_json
from rlctl.domain.features import FeatureSpec


def _layout(spec: FeatureSpec) -> tuple[str, tuple[int, ...]]:
    dtype = "visual" if spec.is_visual else spec.dtype
    return dtype, tuple(spec.shape)


def feature_differences(metas: Sequence[tuple[str, DatasetMeta]]) -> tuple[set[str], list[str]]:
    """Keys to drop so that every dataset yields the same keys and shapes, and why, per dataset."""
    common = set.intersection(*(set(meta.features) for _, meta in metas))
    disabled: set[str] = set()
    reasons: list[str] = []
    for name, meta in metas:
        extra = sorted(set(meta.features) - common)
        if extra:
            disabled.update(extra)
            reasons.append(f"{name} has {extra}, which not every dataset has")
    for key in sorted(common):
        specs = {name: meta.features[key] for name, meta in metas}
        if len({_layout(spec) for spec in specs.values()}) > 1:
            disabled.add(key)
            listing = ", ".join(f"{n}: {_layout(s)}" for n, s in specs.items())
            reasons.append(f"{key!r} differs in dtype or shape ({listing})")
    rates = {meta.fps for _, meta in metas}
    if len(rates) > 1:
        reasons.append(
            "fps differ (" + ", ".join(f"{n}: {m.fps}" for n, m in metas) + "); "
            "delta_timestamps are converted to frames with each dataset's own fps"
        )
    return disabled, reasons


def mixture_meta(metas: Sequence[tuple[str, DatasetMeta]]) -> tuple[DatasetMeta, list[str]]:
    """The metadata of datasets trained on as one — their shared features, every frame, episode
    count and task, statistics aggregated over all of them — and what was left out, and why.

    A policy runs at one rate: datasets of different fps are refused, as is a mixture that shares
    no action."""
    if not metas:
        raise DatasetError("no dataset given", where="dataset")
    rates = {meta.fps for _, meta in metas}
    if len(rates) > 1:
        listing = ", ".join(f"{name}: {meta.fps}" for name, meta in metas)
        raise DatasetError(
            f"the datasets of a mixture must share one frame rate ({listing})",
            where="dataset",
            hint="train on datasets recorded at the same fps (a policy acts at one rate)",
        )
    disabled, reasons = feature_differences(metas)
    first = metas[0][1]
    features = {k: v for k, v in first.features.items() if k not in disabled}
    if "action" not in features:
        raise DatasetError(
            "the datasets of this mixture share no `action` feature of one shape",
            where="dataset",
            hint="; ".join(reasons) or "mix datasets of the same robot",
        )
    parts = [meta.stats for _, meta in metas]
    stats = None
    if all(part is not None for part in parts):
        merged = aggregate_stats([stats_from_json(part) for part in parts if part is not None])
        stats = stats_to_json({k: v for k, v in merged.items() if k in features})
    tasks = tuple(dict.fromkeys(task for _, meta in metas for task in meta.tasks))
    meta = attrs.evolve(
        first,
        features=features,
        total_episodes=sum(meta.total_episodes for _, meta in metas),
        total_frames=sum(meta.total_frames for _, meta in metas),
        tasks=tasks,
        episodes=(),
        stats=stats,
    )
    return meta, reasons
