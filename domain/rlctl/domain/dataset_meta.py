"""What a dataset says about itself: LeRobot's `meta/` folder (info, tasks, episodes, stats)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from rlctl.domain.features import FeatureSpec, video_keys, visual_keys

CODEBASE_VERSION = "v3.0"


@attrs.frozen
class EpisodeRecord:
    """One row of `meta/episodes/*.parquet`; `columns` keeps every column LeRobot wrote."""

    index: int
    length: int
    tasks: tuple[str, ...]
    dataset_from_index: int
    dataset_to_index: int
    columns: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)


@attrs.frozen
class DatasetMeta:
    """`info.json` parsed, plus tasks and episodes.

    `info` keeps the raw mapping, so writing it back loses nothing.
    """

    codebase_version: str
    fps: int
    features: Mapping[str, FeatureSpec]
    total_episodes: int
    total_frames: int
    tasks: tuple[str, ...]
    episodes: tuple[EpisodeRecord, ...]
    robot_type: str | None = None
    chunks_size: int = 1000
    # LeRobot takes any positive number (users lower them to get many small files).
    data_files_size_in_mb: float = 100
    video_files_size_in_mb: float = 200
    data_path: str = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    video_path: str | None = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    stats: Mapping[str, Mapping[str, Any]] | None = attrs.field(default=None, eq=False, repr=False)
    info: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def total_tasks(self) -> int:
        return len(self.tasks)

    @property
    def visual_keys(self) -> list[str]:
        return visual_keys(self.features)

    @property
    def video_keys(self) -> list[str]:
        return video_keys(self.features)

    @property
    def duration_s(self) -> float:
        return self.total_frames / self.fps if self.fps else 0.0
