"""ViewDataset: what the dataset viewer shows, built from the dataset's ports.

The page lists every episode (index, length, tasks, language annotations) and, for the episode a
person picks, plays every camera's clip beside one plot per state/action group. This module
decides what is shown — which features are plotted, how their dimensions are named, which
episode columns are annotations — and leaves HTTP, files and drawing to the viewer adapter.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from rlctl.application.dataset_pages import (
    DatasetPage,
    EpisodePage,
    EpisodeSummary,
    PlotGroup,
)
from rlctl.application.ports.dataset import DatasetMetaReader
from rlctl.application.ports.episode_data import EpisodeDataReader
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import NUMERIC_DTYPES, FeatureKind, dimension_names

# Feature kinds drawn as line plots, in the order the page shows them.
PLOTTED_KINDS = (FeatureKind.STATE, FeatureKind.ACTION, FeatureKind.ENV, FeatureKind.REWARD)
# Episode-metadata columns that are bookkeeping, not annotations a person wrote.
_BOOKKEEPING_PREFIXES = ("data/", "videos/", "stats/", "meta/")
_BOOKKEEPING_COLUMNS = {
    "episode_index",
    "tasks",
    "length",
    "dataset_from_index",
    "dataset_to_index",
}
# Episodes whose plot data stay in memory; a page shows one at a time.
_CACHED_EPISODES = 8


def plot_groups(meta: DatasetMeta) -> tuple[PlotGroup, ...]:
    groups = [
        PlotGroup(key=key, kind=str(spec.kind), names=dimension_names(spec))
        for key, spec in meta.features.items()
        if spec.kind in PLOTTED_KINDS and spec.dtype in NUMERIC_DTYPES
    ]
    order = {kind: i for i, kind in enumerate(PLOTTED_KINDS)}
    return tuple(sorted(groups, key=lambda g: order[FeatureKind(g.kind)]))


def episode_annotations(episode: EpisodeRecord) -> dict[str, str]:
    """Text columns of the episode's metadata row beyond LeRobot's own (language annotations,
    operator notes, success labels written by other tools)."""
    out: dict[str, str] = {}
    for column, value in episode.columns.items():
        if column in _BOOKKEEPING_COLUMNS or column.startswith(_BOOKKEEPING_PREFIXES):
            continue
        if isinstance(value, str) and value:
            out[column] = value
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
            out[column] = "; ".join(value)
    return out


def language_runs(values: np.ndarray) -> list[dict[str, Any]]:
    """`[{"from": frame, "to": frame (exclusive), "text": ...}]` for each run of equal values."""
    runs: list[dict[str, Any]] = []
    for frame, value in enumerate(values.tolist()):
        text = "" if value is None else str(value)
        if runs and runs[-1]["text"] == text:
            runs[-1]["to"] = frame + 1
        else:
            runs.append({"from": frame, "to": frame + 1, "text": text})
    return [run for run in runs if run["text"]]


class DatasetViewer:
    """One dataset opened for viewing: its `page`, and `episode(i)` built on demand (cached)."""

    def __init__(self, location: str, meta: DatasetMeta, reader: EpisodeDataReader) -> None:
        self.location = location
        self.meta = meta
        self._reader = reader
        self._records = {record.index: record for record in meta.episodes}
        self.page = DatasetPage(
            title=location,
            fps=meta.fps,
            robot_type=meta.robot_type,
            total_frames=meta.total_frames,
            cameras=tuple(meta.video_keys),
            image_cameras=tuple(
                key for key, spec in meta.features.items() if spec.is_image and len(spec.shape) == 3
            ),
            groups=plot_groups(meta),
            episodes=tuple(
                EpisodeSummary(
                    index=record.index,
                    length=record.length,
                    duration_s=round(record.length / meta.fps, 3) if meta.fps else 0.0,
                    tasks=record.tasks,
                    annotations=episode_annotations(record),
                )
                for record in meta.episodes
            ),
        )
        self._language_keys = [
            key for key, spec in meta.features.items() if spec.kind is FeatureKind.LANGUAGE
        ]
        self._cache: OrderedDict[int, EpisodePage] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def root(self) -> str:
        return self._reader.root(self.location)

    def episode(self, index: int) -> EpisodePage:
        with self._lock:
            if index in self._cache:
                self._cache.move_to_end(index)
                return self._cache[index]
        page = self._build(index)
        with self._lock:
            self._cache[index] = page
            while len(self._cache) > _CACHED_EPISODES:
                self._cache.popitem(last=False)
        return page

    def frame_image(self, index: int, key: str, frame: int) -> bytes:
        """One picture of an image camera (see `DatasetPage.image_cameras`)."""
        if key not in self.page.image_cameras:
            raise InvalidInput(
                f"{key!r} is not an image camera of this dataset",
                where=self.location,
                hint=f"its image cameras are {', '.join(self.page.image_cameras) or 'none'}",
            )
        record = self._records.get(index)
        if record is None or not 0 <= frame < record.length:
            raise InvalidInput(f"no frame {frame} in episode {index}", where=self.location)
        return self._reader.frame_image(self.location, index, key, frame)

    def _build(self, index: int) -> EpisodePage:
        record = self._records.get(index)
        if record is None:
            raise InvalidInput(
                f"episode {index} does not exist ({len(self._records)} episodes)",
                where=self.location,
                hint="pick an episode from the list",
            )
        keys = [group.key for group in self.page.groups] + self._language_keys
        columns = self._reader.read_columns(self.location, index, [*keys, "timestamp"])
        timestamps = np.asarray(columns["timestamp"], dtype=np.float64).reshape(-1)
        if len(timestamps):
            timestamps = timestamps - timestamps[0]
        series = {
            group.key: np.asarray(columns[group.key], dtype=np.float64).reshape(len(timestamps), -1)
            for group in self.page.groups
        }
        language = {key: language_runs(np.asarray(columns[key])) for key in self._language_keys}
        return EpisodePage(
            index=index,
            fps=self.meta.fps,
            length=record.length,
            tasks=record.tasks,
            timestamps=timestamps,
            series=series,
            videos=tuple(self._reader.video_clips(self.location, index)),
            language={key: runs for key, runs in language.items() if runs},
        )


class ViewDataset:
    def __init__(self, meta_reader: DatasetMetaReader, episode_data: EpisodeDataReader) -> None:
        self._meta_reader = meta_reader
        self._episode_data = episode_data

    def __call__(self, location: str) -> DatasetViewer:
        meta = self._meta_reader.read_meta(location)
        return DatasetViewer(location, meta, self._episode_data)
