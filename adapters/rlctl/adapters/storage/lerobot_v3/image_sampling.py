"""Which camera frames an episode's image statistics are computed from, as LeRobot chooses them.

LeRobot computes per-channel image statistics over about `len ** 0.75` frames (at least 100,
at most 10,000) spread evenly over the episode, each shrunk to roughly 150 pixels on its long
side. The final length is only known when the episode ends, so `FrameSampler` keeps a shrunk copy
of every frame while the episode is short and thins its copies (every other one) whenever it
holds `capacity` of them: exact LeRobot sampling up to `capacity` frames, memory bounded after.
Depth maps (uint16 millimetres, float32 metres) are sampled alike; their statistics stay in their
own unit, not scaled by 1/255, as LeRobot keeps them.
"""

from __future__ import annotations

import numpy as np

from rlctl.domain.statistics import DEFAULT_QUANTILES, FeatureStats, RunningStats, quantile_key

_MIN_SAMPLES = 100
_MAX_SAMPLES = 10_000
_SAMPLE_POWER = 0.75
_TARGET_SIZE = 150
_DOWNSAMPLE_ABOVE = 300
DEFAULT_CAPACITY = 1024


def sample_count(length: int) -> int:
    """LeRobot's `estimate_num_samples`."""
    minimum = min(_MIN_SAMPLES, length)
    return max(minimum, min(int(length**_SAMPLE_POWER), _MAX_SAMPLES))


def sample_indices(length: int) -> np.ndarray:
    """LeRobot's `sample_indices`: evenly spread frame indices, rounded."""
    return np.round(np.linspace(0, length - 1, sample_count(length))).astype(int)


def downsample_step(height: int, width: int) -> int:
    """LeRobot's `auto_downsample_height_width` stride for a frame of this size."""
    if max(height, width) < _DOWNSAMPLE_ABOVE:
        return 1
    return int(width / _TARGET_SIZE) if width > height else int(height / _TARGET_SIZE)


class FrameSampler:
    """Collects shrunk frames (H, W, C) of one camera for one episode's statistics."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = max(2, capacity)
        self._stride = 1  # keeping frames whose index is a multiple of this
        self._kept: list[np.ndarray] = []
        self._count = 0

    @property
    def frame_count(self) -> int:
        return self._count

    def add(self, frame: np.ndarray) -> None:
        if self._count % self._stride == 0:
            step = downsample_step(frame.shape[0], frame.shape[1])
            self._kept.append(np.array(frame[::step, ::step], copy=True))
            if len(self._kept) >= self._capacity:
                self._kept = self._kept[::2]
                self._stride *= 2
        self._count += 1

    def sampled(self) -> np.ndarray:
        """The frames LeRobot would sample, (N, H, W, C); nearest kept frames once thinned."""
        nearest = np.minimum(
            np.rint(sample_indices(self._count) / self._stride), len(self._kept) - 1
        )
        return np.stack([self._kept[int(i)] for i in nearest])

    def stats(self) -> FeatureStats:
        """Per-channel statistics shaped (C, 1, 1), `count` the sampled frames: in [0, 1] for
        uint8 pictures, in the frames' own unit for depth maps."""
        sampled = self.sampled()
        if sampled.dtype == np.uint8:
            return uint8_channel_stats(sampled)
        running = RunningStats.per_channel(channel_axis=-1)
        running.update(sampled)
        return running.result()


def uint8_channel_stats(frames: np.ndarray) -> FeatureStats:
    """Exact per-channel statistics of uint8 frames (N, H, W, C), scaled by 1/255.

    The same numbers as `RunningStats.per_channel(channel_axis=-1, divide_by=255)` while that is
    exact, but from a 256-bin count per channel: an episode's frames take milliseconds, not
    seconds, and the quantiles stay exact (numpy's linear interpolation) at any size.
    """
    channels = frames.shape[-1]
    pixels = frames.reshape(-1, channels)
    levels = np.arange(256, dtype=np.float64)
    columns: dict[str, list[float]] = {"min": [], "max": [], "mean": [], "std": []}
    quantiles: dict[str, list[float]] = {quantile_key(q): [] for q in DEFAULT_QUANTILES}
    for channel in range(channels):
        counts = np.bincount(pixels[:, channel], minlength=256).astype(np.float64)
        total = counts.sum()
        present = np.flatnonzero(counts)
        mean = float(counts @ levels) / total
        columns["min"].append(float(present[0]))
        columns["max"].append(float(present[-1]))
        columns["mean"].append(mean)
        columns["std"].append(float(np.sqrt(counts @ (levels - mean) ** 2 / total)))
        cumulative = np.cumsum(counts)
        for q in DEFAULT_QUANTILES:
            quantiles[quantile_key(q)].append(_interpolated_quantile(cumulative, q, total))

    def shaped(values: list[float]) -> np.ndarray:
        return (np.asarray(values) / 255.0).reshape(channels, 1, 1)

    return FeatureStats(
        min=shaped(columns["min"]),
        max=shaped(columns["max"]),
        mean=shaped(columns["mean"]),
        std=shaped(columns["std"]),
        count=int(frames.shape[0]),
        quantiles={key: shaped(values) for key, values in quantiles.items()},
    )


def _interpolated_quantile(cumulative: np.ndarray, level: float, total: float) -> float:
    """np.quantile's linear method over the values a cumulative 256-bin count describes."""
    position = level * (total - 1)
    below = int(np.floor(position))
    above = min(below + 1, int(total) - 1)
    # The k-th smallest value is the first level whose cumulative count exceeds k.
    low, high = np.searchsorted(cumulative, [below, above], side="right")
    return float(low + (position - below) * (high - low))
