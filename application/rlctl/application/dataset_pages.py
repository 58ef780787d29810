"""What the dataset viewer shows, as plain data: the dataset's page and one episode's page.

`ViewDataset` (the use case) builds them; the viewer's server, its static export and its charts
(adapters) read them, so both sides share these classes and neither imports the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from rlctl.application.ports.episode_data import VideoClip


@attrs.frozen
class PlotGroup:
    """One plot: a numeric feature, a line per dimension named from the feature's `names`."""

    key: str
    kind: str
    names: tuple[str, ...]


@attrs.frozen
class EpisodeSummary:
    index: int
    length: int
    duration_s: float
    tasks: tuple[str, ...]
    annotations: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class DatasetPage:
    title: str
    fps: int
    robot_type: str | None
    total_frames: int
    cameras: tuple[str, ...]
    groups: tuple[PlotGroup, ...]
    episodes: tuple[EpisodeSummary, ...]
    # Cameras stored as pictures in the data files (no video): shown a frame at a time.
    image_cameras: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=True, value_serializer=_plain)


@attrs.frozen(eq=False)
class EpisodePage:
    """One episode's data: `series[key]` is `(frames, dims)`; `timestamps` are seconds from the
    episode's start; `language` maps a string feature to its runs of equal values."""

    index: int
    fps: int
    length: int
    tasks: tuple[str, ...]
    timestamps: np.ndarray
    series: Mapping[str, np.ndarray]
    videos: tuple[VideoClip, ...]
    language: Mapping[str, list[dict[str, Any]]] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "fps": self.fps,
            "length": self.length,
            "tasks": list(self.tasks),
            "timestamps": _floats(self.timestamps),
            "series": {
                key: [_floats(column) for column in values.T] for key, values in self.series.items()
            },
            "videos": [attrs.asdict(clip) for clip in self.videos],
            "language": dict(self.language),
        }


def _plain(_inst: Any, _field: Any, value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _floats(values: np.ndarray) -> list[float | None]:
    """JSON has no NaN: missing values become null; six significant digits are plenty to draw."""
    return [None if not math.isfinite(v) else float(f"{v:.6g}") for v in values.tolist()]
