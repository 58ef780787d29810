"""InspectDataset: what a dataset holds, in one summary a person or a program can read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from rlctl.application.ports.dataset import DatasetMetaReader, LanguageAnnotations
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.language import ColumnSummary


@attrs.frozen
class DatasetSummary:
    location: str
    codebase_version: str
    robot_type: str | None
    fps: int
    total_episodes: int
    total_frames: int
    duration_s: float
    tasks: tuple[str, ...]
    features: dict[str, dict[str, Any]]
    video_keys: tuple[str, ...]
    size_bytes: int
    # Per language column (`language_persistent`, `language_events`): rows by style and camera.
    language: Mapping[str, ColumnSummary] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=True, value_serializer=_plain)


def _plain(_inst: Any, _field: Any, value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


class InspectDataset:
    def __init__(
        self, meta_reader: DatasetMetaReader, language: LanguageAnnotations | None = None
    ) -> None:
        self._meta_reader = meta_reader
        self._language = language

    def __call__(self, location: str) -> DatasetSummary:
        meta = self._meta_reader.read_meta(location)
        has_language = any(spec.is_language for spec in meta.features.values())
        counts = (
            self._language.summarize_language(location)
            if self._language is not None and has_language
            else {}
        )
        return summarize(location, meta, self._meta_reader.size_on_disk(location), counts)


def summarize(
    location: str,
    meta: DatasetMeta,
    size_bytes: int,
    language: Mapping[str, ColumnSummary] | None = None,
) -> DatasetSummary:
    return DatasetSummary(
        location=location,
        codebase_version=meta.codebase_version,
        robot_type=meta.robot_type,
        fps=meta.fps,
        total_episodes=meta.total_episodes,
        total_frames=meta.total_frames,
        duration_s=round(meta.duration_s, 3),
        tasks=tuple(meta.tasks),
        features={key: spec.to_info() for key, spec in meta.features.items()},
        video_keys=tuple(meta.video_keys),
        size_bytes=size_bytes,
        language=dict(language or {}),
    )
