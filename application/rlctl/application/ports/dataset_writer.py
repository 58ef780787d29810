"""Ports for writing datasets: open a dataset for recording, then add frames episode by episode.

A `DatasetWriter` creates a new dataset or resumes an existing one and hands back a
`DatasetWriteSession`. The session buffers the frames of the current episode; `save_episode`
commits it whole or not at all, so a crash at any moment keeps every earlier committed episode
readable. Commits may run in the background (video encoding is slow); `flush` waits for them,
`finalize` waits and closes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, Self

from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Frame
from rlctl.domain.video import VideoEncoding


class DatasetWriteSession(Protocol):
    """One open dataset being appended to. Not thread-safe: drive it from one thread."""

    @property
    def root(self) -> Path: ...

    @property
    def fps(self) -> int: ...

    @property
    def features(self) -> Mapping[str, FeatureSpec]:
        """Every feature, the bookkeeping columns (index, timestamp, ...) included."""
        ...

    @property
    def num_episodes(self) -> int:
        """Episodes saved so far (committed or still being committed), this session included."""
        ...

    @property
    def num_frames(self) -> int:
        """Frames of the saved episodes (the episode being recorded is not counted)."""
        ...

    @property
    def episode_frames(self) -> int:
        """Frames added to the episode being recorded."""
        ...

    def add_frame(self, frame: Frame | Mapping[str, Any]) -> None:
        """Append one step to the current episode.

        A mapping holds every user feature plus `"task"`; a `Frame` carries its task itself. The
        written timestamp is always `frame_index / fps` (as LeRobot writes it), so a `Frame`'s
        own timestamp is not stored and a mapping may not hold the bookkeeping columns.
        Raises `FeatureMismatch` naming the key when a value does not fit its feature.
        """
        ...

    def save_episode(self) -> EpisodeRecord:
        """Close the current episode and queue its commit; returns where it will sit.

        Returns without waiting for video encoding. Raises `InvalidInput` when no frame was
        added, or the error of an earlier commit that failed in the background.
        """
        ...

    def clear_episode_buffer(self) -> None:
        """Drop the frames of the current episode; nothing of it reaches the disk."""
        ...

    def flush(self) -> DatasetMeta:
        """Wait until every saved episode is committed; returns the dataset as now on disk."""
        ...

    def finalize(self) -> DatasetMeta:
        """Flush, release files and workers; an unsaved episode is dropped. Idempotent."""
        ...

    def discard(self) -> None:
        """Close the session and remove the dataset it created, leaving what was there before.

        For a session from `create` that saved no episode: a recording that failed before its
        first episode leaves nothing behind. Raises `InvalidInput` for a resumed dataset or one
        holding episodes, and touches nothing then.
        """
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, exc_type: object, exc: object, traceback: object, /) -> None:
        """Finalize; the episode being recorded, if any, is dropped."""
        ...


class DatasetWriter(Protocol):
    """Creates datasets and reopens them for appending."""

    def create(
        self,
        root: Path,
        *,
        fps: int,
        features: Mapping[str, FeatureSpec],
        robot_type: str | None = None,
        video: VideoEncoding | None = None,
        chunks_size: int | None = None,
        data_files_size_in_mb: int | None = None,
        video_files_size_in_mb: int | None = None,
    ) -> DatasetWriteSession:
        """Start a new dataset at `root`, which must not exist or be empty.

        `features` are the user features (the bookkeeping columns are added); `video` is the
        encoding of every `video` feature (LeRobot's AV1 defaults when None).
        """
        ...

    def resume(self, root: Path, *, video: VideoEncoding | None = None) -> DatasetWriteSession:
        """Reopen a dataset to append after its last committed episode.

        Whatever an interrupted session left past that episode is removed first. `video`
        defaults to the encoding recorded in `meta/info.json`.
        """
        ...
