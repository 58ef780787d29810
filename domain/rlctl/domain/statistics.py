"""Per-feature statistics computed in a stream: LeRobot's stats.json numbers, mergeable.

`RunningStats` accumulates batches and merges with another one. Count, mean, std (population,
numpy's default), min and max merge exactly (Chan, Golub & LeVeque's parallel algorithm);
quantiles go through a `QuantileSketch`: exact up to `exact_limit` values per entry, then within
the bound stated in `rlctl.domain.quantile_sketch` (one histogram bin, at most about 1/2048 of
the range with the default 4096 bins), and merging never loses more. The result is a `FeatureStats`
(re-exported here with its stats.json conversions and `aggregate_stats`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.feature_stats import (
    DEFAULT_QUANTILES,
    FeatureStats,
    aggregate_stats,
    quantile_key,
    stats_from_json,
    stats_to_json,
)
from rlctl.domain.quantile_sketch import DEFAULT_BINS, DEFAULT_EXACT_LIMIT, QuantileSketch

__all__ = [
    "DEFAULT_QUANTILES",
    "FeatureStats",
    "RunningStats",
    "aggregate_stats",
    "compute_stats",
    "downsample_for_stats",
    "image_stats",
    "quantile_key",
    "stats_from_json",
    "stats_sample_indices",
    "stats_to_json",
]

# Dtypes with so few distinct values that counting them beats converting every value to float.
_COUNTABLE_DTYPES = (np.dtype(np.uint8), np.dtype(np.bool_))
# Values converted to float64 at a time (8 MiB).
_SLICE_VALUES = 1 << 20


@attrs.frozen(eq=False)
class _Moments:
    """Count, mean, sum of squared deviations, min and max of each entry's values."""

    n: int
    mean: np.ndarray
    m2: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def of_columns(cls, columns: np.ndarray) -> _Moments:
        mean = columns.mean(axis=1)
        deviations = columns - mean[:, None]
        m2 = np.square(deviations, out=deviations).sum(axis=1)
        return cls(columns.shape[1], mean, m2, columns.min(axis=1), columns.max(axis=1))

    @classmethod
    def of_counts(cls, values: np.ndarray, counts: np.ndarray) -> _Moments:
        n = int(counts[0].sum())
        mean = (values * counts).sum(axis=1) / n
        m2 = (counts * (values - mean[:, None]) ** 2).sum(axis=1)
        present = counts > 0
        low = np.where(present, values, np.inf).min(axis=1)
        high = np.where(present, values, -np.inf).max(axis=1)
        return cls(n, mean, m2, low, high)

    def merged(self, other: _Moments) -> _Moments:
        n = self.n + other.n
        delta = other.mean - self.mean
        return _Moments(
            n=n,
            mean=self.mean + delta * (other.n / n),
            m2=self.m2 + other.m2 + delta**2 * (self.n * other.n / n),
            low=np.minimum(self.low, other.low),
            high=np.maximum(self.high, other.high),
        )

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(np.maximum(self.m2 / self.n, 0.0))


class RunningStats:
    """Streaming statistics of one feature, fed batch by batch, mergeable.

    By default a batch `(N, *shape)` is reduced over `N` only: the statistics have the feature's
    shape (`(1,)` for a batch of scalars `(N,)`). `RunningStats.per_channel(channel_axis)` reduces
    everything but the channel axis of image batches, `(N, C, H, W)` with `channel_axis=1` or
    `(N, H, W, C)` with `channel_axis=-1`, giving LeRobot's `(C, 1, 1)` image statistics. Values
    are divided by `divide_by` first: 255 maps uint8 frames into [0, 1] as LeRobot does.
    `RunningStats.for_numeric(rank)` follows LeRobot for numeric features of rank >= 2: statistics
    per entry of the last axis, over the samples and every other axis. `count` is always the
    number of samples `N`, as LeRobot records it.
    """

    def __init__(
        self,
        *,
        channel_axis: int | None = None,
        last_axis: bool = False,
        divide_by: float = 1.0,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        bins: int = DEFAULT_BINS,
        exact_limit: int = DEFAULT_EXACT_LIMIT,
    ) -> None:
        if channel_axis == 0:
            raise InvalidInput("channel_axis 0 is the batch axis", where="statistics")
        if last_axis and channel_axis is not None:
            raise InvalidInput("last_axis and channel_axis exclude each other", where="statistics")
        if not divide_by > 0:
            raise InvalidInput(f"divide_by must be positive, got {divide_by}", where="statistics")
        if not all(0.0 <= q <= 1.0 for q in quantiles):
            raise InvalidInput(
                f"quantile levels must lie in [0, 1], got {list(quantiles)}", where="statistics"
            )
        self.channel_axis = channel_axis
        self.last_axis = last_axis
        self.divide_by = divide_by
        self.quantile_levels = tuple(float(q) for q in quantiles)
        self.bins = bins
        self.exact_limit = exact_limit
        self.count = 0  # samples, not values: an image sample gives H*W values per channel
        self._stats_shape: tuple[int, ...] | None = None
        self._moments: _Moments | None = None
        self._sketch: QuantileSketch | None = None

    @classmethod
    def per_channel(
        cls, channel_axis: int = 1, *, divide_by: float = 1.0, **options: Any
    ) -> RunningStats:
        return cls(channel_axis=channel_axis, divide_by=divide_by, **options)

    @classmethod
    def for_numeric(cls, rank: int, **options: Any) -> RunningStats:
        """Statistics of a numeric (not visual) feature of `rank` dimensions as LeRobot 0.6.1
        computes them: per entry for scalars and vectors; from rank 2 on, per entry of the last
        axis (its `RunningQuantileStats` flattens `(N, *shape)` to `(-1, shape[-1])`), so a
        `(2, 3)` feature has statistics of shape `(3,)`."""
        return cls(last_axis=rank >= 2, **options)

    def update(self, batch: Any) -> None:
        """Add a batch `(N, …)` of samples (numpy or anything `np.asarray` reads)."""
        batch = np.asarray(batch)
        columns, stats_shape = self._columns(batch)
        if columns.shape[1] == 0:
            return
        if self._stats_shape is not None and stats_shape != self._stats_shape:
            raise FeatureMismatch(
                f"batch gives statistics of shape {stats_shape}, earlier batches "
                f"{self._stats_shape}",
                where="statistics",
            )
        # min and max propagate NaN: this catches NaN and infinities before anything changes.
        if not (np.isfinite(columns.min(axis=1)).all() and np.isfinite(columns.max(axis=1)).all()):
            raise InvalidInput(
                "the batch holds NaN or infinite values",
                where="statistics",
                hint="statistics need finite numbers; check the recorded data",
            )
        if self._sketch is None:
            self._stats_shape = stats_shape
            self._sketch = QuantileSketch(
                columns.shape[0], bins=self.bins, exact_limit=self.exact_limit
            )
        if batch.dtype in _COUNTABLE_DTYPES:
            self._add_counted(columns, self._sketch)
        else:
            # Slices bound the float64 temporaries: allocating several copies of a batch of
            # large frames costs more than the arithmetic on them.
            step = max(1, _SLICE_VALUES // columns.shape[0])
            for start in range(0, columns.shape[1], step):
                self._add_floats(columns[:, start : start + step], self._sketch)
        self.count += batch.shape[0]

    def merge(self, other: RunningStats) -> RunningStats:
        """Statistics over both inputs' samples; neither input changes."""
        if self._settings() != other._settings():
            raise InvalidInput("cannot merge statistics set up differently", where="statistics")
        if other._moments is None:
            return self._copy()
        if self._moments is None:
            return other._copy()
        if other._stats_shape != self._stats_shape:
            raise FeatureMismatch(
                f"cannot merge statistics of shapes {self._stats_shape} and {other._stats_shape}",
                where="statistics",
            )
        assert self._sketch is not None and other._sketch is not None
        merged = self._copy()
        merged.count += other.count
        merged._moments = self._moments.merged(other._moments)
        merged._sketch = self._sketch.merge(other._sketch)
        return merged

    def result(self) -> FeatureStats:
        moments, sketch, shape = self._require_data()
        quantiles = sketch.quantiles(self.quantile_levels)
        return FeatureStats(
            min=moments.low.reshape(shape),
            max=moments.high.reshape(shape),
            mean=moments.mean.reshape(shape),
            std=moments.std.reshape(shape),
            count=self.count,
            quantiles={
                quantile_key(level): quantiles[i].reshape(shape)
                for i, level in enumerate(self.quantile_levels)
            },
        )

    def quantile_error_bound(self) -> np.ndarray:
        """How far each quantile of `result()` may be from `np.quantile` over the same values."""
        _, sketch, shape = self._require_data()
        return sketch.error_bound().reshape(shape)

    def _require_data(self) -> tuple[_Moments, QuantileSketch, tuple[int, ...]]:
        if self._moments is None or self._sketch is None or self._stats_shape is None:
            raise InvalidInput(
                "no samples were given to compute statistics from", where="statistics"
            )
        return self._moments, self._sketch, self._stats_shape

    def _add_floats(self, columns: np.ndarray, sketch: QuantileSketch) -> None:
        values = columns.astype(np.float64)  # always a copy: the sketch may keep it
        if self.divide_by != 1.0:
            values /= self.divide_by
        self._add_moments(_Moments.of_columns(values))
        sketch.add(values)

    def _add_counted(self, columns: np.ndarray, sketch: QuantileSketch) -> None:
        # 256 counts per column stand for any number of uint8 values: no float copy of the batch.
        distinct = np.arange(256 if columns.dtype == np.uint8 else 2)
        counts = np.stack([np.bincount(c, minlength=distinct.size) for c in columns.view(np.uint8)])
        values = np.broadcast_to(distinct / self.divide_by, counts.shape)
        self._add_moments(_Moments.of_counts(values, counts))
        sketch.add_counted(values, counts)

    def _add_moments(self, moments: _Moments) -> None:
        self._moments = moments if self._moments is None else self._moments.merged(moments)

    def _columns(self, batch: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        """The batch laid out as `(entries, values per entry)`, and the shape of its statistics.

        Columns first: numpy reduces a contiguous last axis many times faster than a strided one.
        """
        if batch.ndim == 0:
            raise InvalidInput("a batch needs a leading sample axis", where="statistics")
        if self.last_axis and batch.ndim >= 3:
            last = batch.shape[-1]
            return np.ascontiguousarray(batch.reshape(-1, last).T), (last,)
        if self.channel_axis is None:
            stats_shape = batch.shape[1:] or (1,)
            rows = batch.reshape(batch.shape[0], int(np.prod(stats_shape)))
            return np.ascontiguousarray(rows.T), stats_shape
        if batch.ndim < 2 or not -batch.ndim <= self.channel_axis < batch.ndim:
            raise InvalidInput(
                f"a batch of shape {batch.shape} has no channel axis {self.channel_axis}",
                where="statistics",
                hint="image batches are (N, C, H, W) with channel_axis=1 or (N, H, W, C) "
                "with channel_axis=-1",
            )
        channels = batch.shape[self.channel_axis]
        by_channel = np.ascontiguousarray(np.moveaxis(batch, self.channel_axis, 0))
        return by_channel.reshape(channels, -1), (channels,) + (1,) * (batch.ndim - 2)

    def _settings(self) -> tuple[Any, ...]:
        return (
            self.channel_axis,
            self.last_axis,
            self.divide_by,
            self.quantile_levels,
            self.bins,
            self.exact_limit,
        )

    def _copy(self) -> RunningStats:
        twin = RunningStats(
            channel_axis=self.channel_axis,
            last_axis=self.last_axis,
            divide_by=self.divide_by,
            quantiles=self.quantile_levels,
            bins=self.bins,
            exact_limit=self.exact_limit,
        )
        twin.count, twin._stats_shape, twin._moments = self.count, self._stats_shape, self._moments
        twin._sketch = None if self._sketch is None else self._sketch.copy()
        return twin


def compute_stats(batch: Any, **options: Any) -> FeatureStats:
    """Statistics of one batch at once; `options` as for `RunningStats`."""
    stats = RunningStats(**options)
    stats.update(batch)
    return stats.result()


def stats_sample_indices(length: int) -> list[int]:
    """The frames of an episode LeRobot reads for image statistics (its `sample_indices`).

    All frames up to 100, then about `length ** 0.75`, at most 10,000, evenly spread; LeRobot
    records their number as the image features' `count`.
    """
    if length <= 0:
        return []
    samples = max(min(length, 100), min(int(length**0.75), 10_000))
    return np.round(np.linspace(0, length - 1, samples)).astype(int).tolist()


def downsample_for_stats(
    frame: np.ndarray, target_size: int = 150, max_size_threshold: int = 300
) -> np.ndarray:
    """A `(C, H, W)` frame thinned by striding once a side reaches the threshold, as LeRobot's
    `auto_downsample_height_width` does before image statistics."""
    _, height, width = frame.shape
    if max(height, width) < max_size_threshold:
        return frame
    stride = int(width / target_size) if width > height else int(height / target_size)
    return frame[:, ::stride, ::stride]


def image_stats(frames: np.ndarray) -> FeatureStats:
    """Per-channel statistics of uint8 (N, H, W, C) frames, shrunk and scaled as LeRobot does."""
    shrunk = np.stack([downsample_for_stats(np.moveaxis(f, -1, 0)) for f in frames])
    running = RunningStats.per_channel(channel_axis=1, divide_by=255.0)
    running.update(shrunk)
    return running.result()
