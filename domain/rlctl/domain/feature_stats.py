"""Final per-feature statistics, as LeRobot's `meta/stats.json` and episode metadata hold them.

`FeatureStats` converts to and from stats.json losslessly; `aggregate_stats` combines per-episode
statistics exactly as LeRobot 0.6.1 does. Computing them is `rlctl.domain.statistics`' job.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import FeatureMismatch, InvalidInput

DEFAULT_QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
_MOMENT_KEYS = ("min", "max", "mean", "std")
# LeRobot's test for a quantile key: "q" then digits.
_QUANTILE_KEY = re.compile(r"q\d+")


def quantile_key(level: float) -> str:
    """The stats.json key of a quantile level: 0.01 -> "q01", 0.5 -> "q50"."""
    return f"q{round(level * 100):02d}"


def _float_array(value: Any) -> np.ndarray:
    return np.atleast_1d(np.asarray(value, dtype=np.float64))


def _quantile_arrays(value: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {key: _float_array(v) for key, v in value.items()}


@attrs.frozen(eq=False)
class FeatureStats:
    """Statistics of one feature. Arrays have the feature's stats shape: `(dim,)` for vectors,
    `(channels, 1, 1)` for images. `quantiles` maps "q01"… to arrays; `extra` keeps any other key
    read from stats.json so that writing it back loses nothing. `count` is None only for files
    that did not record it.
    """

    min: np.ndarray = attrs.field(converter=_float_array)
    max: np.ndarray = attrs.field(converter=_float_array)
    mean: np.ndarray = attrs.field(converter=_float_array)
    std: np.ndarray = attrs.field(converter=_float_array)
    count: int | None = None
    quantiles: Mapping[str, np.ndarray] = attrs.field(factory=dict, converter=_quantile_arrays)
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        shapes = {k: getattr(self, k).shape for k in _MOMENT_KEYS}
        shapes.update({k: v.shape for k, v in self.quantiles.items()})
        if len(set(shapes.values())) > 1:
            raise InvalidInput(f"statistics of different shapes: {shapes}", where="stats")

    @property
    def shape(self) -> tuple[int, ...]:
        return self.mean.shape

    def to_json(self) -> dict[str, Any]:
        """The stats.json entry: nested lists, `count` as a 1-element list, LeRobot's key order."""
        out: dict[str, Any] = {k: getattr(self, k).tolist() for k in _MOMENT_KEYS}
        if self.count is not None:
            out["count"] = [int(self.count)]
        out.update({k: v.tolist() for k, v in self.quantiles.items()})
        out.update(copy.deepcopy(dict(self.extra)))
        return out

    @classmethod
    def from_json(cls, entry: Mapping[str, Any], *, where: str = "stats") -> FeatureStats:
        if not isinstance(entry, Mapping):
            raise InvalidInput(
                f"feature statistics must be a mapping, got {type(entry).__name__}", where=where
            )
        missing = [k for k in _MOMENT_KEYS if k not in entry]
        if missing:
            raise InvalidInput(
                f"statistics lack {', '.join(missing)}",
                where=where,
                hint="recompute the statistics (`rlctl dataset recompute-stats`)",
            )
        try:
            return cls(
                **{k: entry[k] for k in _MOMENT_KEYS},
                count=_count(entry.get("count"), where),
                quantiles={k: v for k, v in entry.items() if _QUANTILE_KEY.fullmatch(k)},
                extra={
                    k: copy.deepcopy(v)
                    for k, v in entry.items()
                    if k not in _MOMENT_KEYS and k != "count" and not _QUANTILE_KEY.fullmatch(k)
                },
            )
        except (TypeError, ValueError) as err:
            raise InvalidInput(f"statistics are not numeric arrays: {err}", where=where) from err


def _count(value: Any, where: str) -> int | None:
    if value is None:
        return None
    counts = np.asarray(value).reshape(-1)
    if counts.size != 1:
        raise InvalidInput(f"count must hold one number, got {value!r}", where=f"{where}.count")
    return int(counts[0])


def stats_to_json(stats: Mapping[str, FeatureStats]) -> dict[str, dict[str, Any]]:
    return {key: feature.to_json() for key, feature in stats.items()}


def stats_from_json(data: Mapping[str, Any]) -> dict[str, FeatureStats]:
    """Parse stats.json (feature key -> statistics)."""
    if not isinstance(data, Mapping):
        raise InvalidInput("stats must map feature keys to statistics", where="stats")
    return {key: FeatureStats.from_json(entry, where=f"stats.{key}") for key, entry in data.items()}


def aggregate_stats(stats_list: Sequence[Mapping[str, FeatureStats]]) -> dict[str, FeatureStats]:
    """Combine per-episode statistics the way LeRobot 0.6.1's `aggregate_stats` does.

    Count-weighted mean, pooled variance (exact for count/mean/std/min/max), min of mins, max of
    maxes; each quantile present in every input becomes the count-weighted mean of the inputs'
    quantiles (an approximation LeRobot makes, kept for identical stats.json files). A feature
    missing from some inputs is aggregated over those that have it; `extra` keys are dropped.
    """
    keys = list(dict.fromkeys(key for stats in stats_list for key in stats))
    return {key: _aggregate_feature(key, [s[key] for s in stats_list if key in s]) for key in keys}


def _aggregate_feature(key: str, parts: list[FeatureStats]) -> FeatureStats:
    if len({p.shape for p in parts}) > 1:
        raise FeatureMismatch(
            f"statistics of different shapes across episodes: {sorted({p.shape for p in parts})}",
            where=f"stats.{key}",
        )
    if any(p.count is None for p in parts):
        raise InvalidInput(
            "statistics without a count cannot be aggregated",
            where=f"stats.{key}",
            hint="recompute the per-episode statistics",
        )
    counts = np.array([p.count for p in parts], dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        raise InvalidInput("statistics with a total count of 0", where=f"stats.{key}")
    weights = counts.reshape(-1, *([1] * len(parts[0].shape)))

    def weighted_mean(arrays: list[np.ndarray]) -> np.ndarray:
        return (np.stack(arrays) * weights).sum(axis=0) / total

    means = np.stack([p.mean for p in parts])
    mean = weighted_mean(list(means))
    variance = weighted_mean([p.std**2 + (m - mean) ** 2 for p, m in zip(parts, means)])
    shared_quantiles = [q for q in parts[0].quantiles if all(q in p.quantiles for p in parts)]
    return FeatureStats(
        min=np.min(np.stack([p.min for p in parts]), axis=0),
        max=np.max(np.stack([p.max for p in parts]), axis=0),
        mean=mean,
        std=np.sqrt(variance),
        count=int(total),
        quantiles={q: weighted_mean([p.quantiles[q] for p in parts]) for q in shared_quantiles},
    )
