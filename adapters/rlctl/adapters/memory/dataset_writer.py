"""Datasets recorded into a dict: the `DatasetWriter` port without files, codecs or threads.

Frames are validated exactly as the LeRobot writer validates them, episodes and tasks are
numbered the same way, and `save_episode` commits at once, so a use case under test sees what it
would see on disk. `datasets` holds everything recorded, keyed by root.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

import attrs

from rlctl.adapters.storage.lerobot_v3.frame_validation import (
    FrameValidator,
    ValidFrame,
    dataset_features,
)
from rlctl.domain.dataset_meta import CODEBASE_VERSION, DatasetMeta, EpisodeRecord
from rlctl.domain.errors import DatasetNotFound, InvalidInput
from rlctl.domain.features import FeatureSpec, features_to_info
from rlctl.domain.frames import Frame
from rlctl.domain.video import VideoEncoding


@attrs.define
class RecordedDataset:
    """One dataset in memory: its settings, tasks, and each episode's frames."""

    fps: int
    features: dict[str, FeatureSpec]
    robot_type: str | None
    video: VideoEncoding
    tasks: list[str] = attrs.field(factory=list)
    episodes: list[EpisodeRecord] = attrs.field(factory=list)
    frames: list[tuple[ValidFrame, ...]] = attrs.field(factory=list)

    @property
    def total_frames(self) -> int:
        return sum(e.length for e in self.episodes)

    def meta(self) -> DatasetMeta:
        info = {"fps": self.fps, "features": features_to_info(self.features)}
        return DatasetMeta(
            codebase_version=CODEBASE_VERSION,
            fps=self.fps,
            features=self.features,
            total_episodes=len(self.episodes),
            total_frames=self.total_frames,
            tasks=tuple(self.tasks),
            episodes=tuple(self.episodes),
            robot_type=self.robot_type,
            video_path=None,
            info=info,
        )


class InMemoryWriteSession:
    """`DatasetWriteSession` appending to a `RecordedDataset`."""

    def __init__(
        self, root: Path, dataset: RecordedDataset, forget: Callable[[], object] | None = None
    ) -> None:
        """`forget` removes the dataset from its writer: given when this session created it."""
        self._root = root
        self._dataset = dataset
        self._forget = forget
        self._validate = FrameValidator(dataset.features)
        self._episode: list[ValidFrame] = []
        self._finalized = False

    @property
    def root(self) -> Path:
        return self._root

    @property
    def fps(self) -> int:
        return self._dataset.fps

    @property
    def features(self) -> Mapping[str, FeatureSpec]:
        return self._dataset.features

    @property
    def num_episodes(self) -> int:
        return len(self._dataset.episodes)

    @property
    def num_frames(self) -> int:
        return self._dataset.total_frames

    @property
    def episode_frames(self) -> int:
        return len(self._episode)

    def add_frame(self, frame: Frame | Mapping[str, Any]) -> None:
        self._check_open()
        self._episode.append(self._validate(frame))

    def save_episode(self) -> EpisodeRecord:
        self._check_open()
        if not self._episode:
            raise InvalidInput(
                "the episode has no frames", where="save_episode", hint="add frames first"
            )
        dataset = self._dataset
        for frame in self._episode:
            if frame.task not in dataset.tasks:
                dataset.tasks.append(frame.task)
        start = dataset.total_frames
        record = EpisodeRecord(
            index=len(dataset.episodes),
            length=len(self._episode),
            tasks=tuple(dict.fromkeys(f.task for f in self._episode)),
            dataset_from_index=start,
            dataset_to_index=start + len(self._episode),
        )
        dataset.episodes.append(record)
        dataset.frames.append(tuple(self._episode))
        self._episode = []
        return record

    def clear_episode_buffer(self) -> None:
        self._episode = []

    def flush(self) -> DatasetMeta:
        self._check_open()
        return self._dataset.meta()

    def finalize(self) -> DatasetMeta:
        self._finalized = True
        self._episode = []
        return self._dataset.meta()

    def discard(self) -> None:
        if self._forget is None or self._dataset.episodes:
            raise InvalidInput(
                "only a dataset this session created, with no episode saved, can be discarded",
                where=str(self._root),
            )
        self.finalize()
        self._forget()
        self._forget = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finalize()

    def _check_open(self) -> None:
        if self._finalized:
            raise InvalidInput(
                "the dataset was finalized", where=str(self._root), hint="resume it to add episodes"
            )


class InMemoryDatasetWriter:
    """`DatasetWriter` whose datasets live in `self.datasets`."""

    def __init__(self) -> None:
        self.datasets: dict[Path, RecordedDataset] = {}

    def create(
        self,
        root: Path,
        *,
        fps: int,
        features: Mapping[str, FeatureSpec | Mapping[str, Any]],
        robot_type: str | None = None,
        video: VideoEncoding | None = None,
        chunks_size: int | None = None,
        data_files_size_in_mb: int | None = None,
        video_files_size_in_mb: int | None = None,
    ) -> InMemoryWriteSession:
        root = Path(root)
        if root in self.datasets:
            raise InvalidInput(
                "a dataset is already there",
                where=str(root),
                hint="choose a new root, or resume the dataset that is there",
            )
        if isinstance(fps, bool) or not isinstance(fps, int) or fps <= 0:
            raise InvalidInput(f"fps must be a positive whole number, got {fps!r}", where="fps")
        dataset = RecordedDataset(
            fps=fps,
            features=dataset_features(features),
            robot_type=robot_type,
            video=video or VideoEncoding(),
        )
        self.datasets[root] = dataset
        return InMemoryWriteSession(root, dataset, forget=lambda: self.datasets.pop(root, None))

    def resume(self, root: Path, *, video: VideoEncoding | None = None) -> InMemoryWriteSession:
        root = Path(root)
        if root not in self.datasets:
            raise DatasetNotFound(
                "no dataset recorded here",
                where=str(root),
                hint=f"known: {', '.join(map(str, self.datasets)) or '(none)'}",
            )
        return InMemoryWriteSession(root, self.datasets[root])
