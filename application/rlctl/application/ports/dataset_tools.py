"""Ports for the dataset tools: checking a dataset, rebuilding one from episodes of others,
replacing a dataset folder safely, recomputing statistics, and reading older formats.

The use cases (check, merge, split, delete-episodes, recompute-stats, convert) decide which
episodes go where, in what order, and what happens on failure; these ports do the file work.
Locations are strings (a local folder for the LeRobot adapters, a key for the in-memory ones).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Literal, Protocol

import attrs
import numpy as np

from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.rl.roi import RegionCrop
from rlctl.domain.statistics import FeatureStats
from rlctl.domain.video import VideoEncoding

Severity = Literal["error", "warning"]


@attrs.frozen
class DatasetProblem:
    """One thing wrong with a dataset: what, in which file (relative to the root), which key or
    episode, and what to do. Warnings (an interrupted commit, a stray file) do not fail a check."""

    message: str
    file: str | None = None
    key: str | None = None
    episode: int | None = None
    hint: str | None = None
    severity: Severity = "error"

    @property
    def where(self) -> str:
        parts = [self.file or ""]
        if self.key is not None:
            parts.append(self.key)
        if self.episode is not None:
            parts.append(f"episode {self.episode}")
        return ": ".join(p for p in parts if p)


class DatasetCheck(Protocol):
    """A dataset opened for checking: its metadata's problems, then one unit per file."""

    @property
    def opening_problems(self) -> Sequence[DatasetProblem]:
        """Problems of `meta/` (info.json, tasks, episodes, stats), found when opening."""
        ...

    @property
    def units(self) -> Sequence[str]:
        """The files still to check (data and video files), relative to the root."""
        ...

    def check(self, unit: str) -> list[DatasetProblem]:
        """Read one file whole and compare it with the metadata; every problem found."""
        ...


class DatasetChecker(Protocol):
    def open(self, location: str) -> DatasetCheck:
        """Read the metadata; never raises for a damaged dataset (problems are reported)."""
        ...


@attrs.frozen
class EpisodeRef:
    """Episode `episode` of the dataset at `location` (v3.0, or an older format being converted)."""

    location: str
    episode: int


def _crops(value: Mapping[str, RegionCrop]) -> dict[str, RegionCrop]:
    return dict(value)


def _encodings(value: Mapping[str, VideoEncoding]) -> dict[str, VideoEncoding]:
    return dict(value)


@attrs.frozen
class FeatureChanges:
    """How a rebuilt dataset's features differ from its sources' (the template holds the new
    ones): features left out, features whose values each episode brings (`EpisodeEdit.columns`),
    and cameras whose frames are encoded anew with the given settings (from a source stored as
    images, or as video in other settings)."""

    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    encoded: Mapping[str, VideoEncoding] = attrs.field(factory=dict, converter=_encodings)
    # Cameras whose frames are cropped and resized (their new shape in the template); a video
    # camera is encoded anew (with `encoded`'s settings for it, else its own).
    cropped: Mapping[str, RegionCrop] = attrs.field(factory=dict, converter=_crops)

    @property
    def empty(self) -> bool:
        return not (self.removed or self.added or self.encoded or self.cropped)


def _columns(value: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return dict(value)


def _renames(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


@attrs.frozen
class EpisodeEdit:
    """What changes in one episode as it is copied: the values of added features (one row per
    frame), and its tasks: `task` for every row, or else `tasks` renaming the source's tasks
    (tasks it does not name stay)."""

    columns: Mapping[str, np.ndarray] = attrs.field(factory=dict, converter=_columns, eq=False)
    task: str | None = None
    tasks: Mapping[str, str] = attrs.field(factory=dict, converter=_renames)


class DatasetRebuild(Protocol):
    """A new dataset being written from episodes of existing ones, in the order given.

    Episodes are renumbered from 0, their rows re-indexed, tasks renumbered by first use; video
    frames are copied without re-encoding where the files allow it.
    """

    def add_episode(self, ref: EpisodeRef, edit: EpisodeEdit | None = None) -> EpisodeRecord:
        """Append one episode (changed by `edit`); returns its place in the new dataset."""
        ...

    def finish(self, stats: Mapping[str, FeatureStats] | None = None) -> DatasetMeta:
        """Write the metadata, info.json last. stats.json is the aggregate of the episodes'
        statistics, with `stats` replacing the features it names."""
        ...

    def abort(self) -> None:
        """Stop and remove everything written so far."""
        ...


class DatasetRebuilder(Protocol):
    def start(
        self, output: str, template: DatasetMeta, changes: FeatureChanges | None = None
    ) -> DatasetRebuild:
        """Start a dataset at `output` (absent or empty) with `template`'s fps, features, robot
        type and file-size settings. Without `changes` the sources must have the template's
        features; with them, the template's features as `changes` make them."""
        ...


@attrs.frozen
class EditRecord:
    """One edit made in place, as the dataset's journal keeps it: the tool, its request in a
    canonical form, fingerprints of the dataset before and after (`dataset_fingerprint`), and
    when, by which process and command (filled in by the adapter when empty)."""

    tool: str
    request: str
    after: str
    before: str = ""
    at: str = ""
    command: str = ""
    pid: str = ""


class DatasetFolders(Protocol):
    """Where datasets live, and replacing one without a moment when neither copy is readable."""

    def exists(self, location: str) -> bool: ...

    def is_empty(self, location: str) -> bool:
        """True when nothing is there, or an empty folder."""
        ...

    def staging_for(self, location: str) -> str:
        """A fresh location next to `location` (same disk) to build its replacement in."""
        ...

    def replace(
        self, staged: str, location: str, keep_old_at: str | None = None
    ) -> tuple[str, ...]:
        """Put `staged` at `location` in one step; the old dataset is removed afterwards, or moved
        to `keep_old_at`. What the old folder held besides the dataset (a card, notes, other
        folders) is carried into the new one untouched, the card's counts updated; returns
        those entries' names. On a failure before the swap, `staged` is removed and `location`
        is as it was."""
        ...

    def remove(self, location: str) -> None: ...

    def last_edit(self, location: str) -> EditRecord | None:
        """The newest edit the dataset's journal records (None without one)."""
        ...

    def record_edit(self, staged: str, location: str, record: EditRecord) -> None:
        """Write `location`'s journal plus `record` into `staged`, so that the swap makes the
        edit and its record appear together."""
        ...

    def clean_leftovers(self, location: str) -> tuple[str, ...]:
        """Remove what killed writers of the dataset left (temporary files and folders, an
        edit's folders beside it), holding its lock; returns what was removed. Raises at once
        while a live writer holds the lock."""
        ...

    def lock(self, location: str) -> AbstractContextManager[object]:
        """Hold the dataset's write lock for a block (an edit in place, from reading it to the
        swap); raises at once, naming the holder, while another writer holds it."""
        ...


class LegacyDatasetReader(Protocol):
    """Datasets in LeRobot's older formats (v2.1), read so they can be rebuilt as v3.0."""

    def read_meta(self, location: str) -> DatasetMeta:
        """Features, fps, tasks and episodes (lengths, tasks) of an old-format dataset."""
        ...


class DatasetStatsAccess(Protocol):
    """What statistics are computed from, and where they are written."""

    def numeric_columns(
        self, location: str, keys: Sequence[str]
    ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """Per episode, in order: (episode index, key -> (length, *shape) values)."""
        ...

    def frames(self, location: str, key: str, episode: int, indices: Sequence[int]) -> np.ndarray:
        """Frames `indices` (within the episode) of a camera, uint8 (N, H, W, C)."""
        ...

    def write_stats(
        self,
        location: str,
        episode_stats: Mapping[int, Mapping[str, FeatureStats]],
        stats: Mapping[str, FeatureStats],
    ) -> None:
        """Replace the named per-episode statistics in meta/episodes, then stats.json whole."""
        ...

    def lock(self, location: str) -> AbstractContextManager[object]:
        """Hold the dataset's write lock for a block (from reading the values to writing the
        statistics); raises at once, naming the holder, while another writer holds it."""
        ...
