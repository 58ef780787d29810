"""LeRobot v2.1 and v2.0 datasets: a parquet file and an mp4 per episode, metadata in JSON lines.

    meta/info.json             codebase_version "v2.1", data_path / video_path templates filled
                               with episode_chunk (= episode_index // chunks_size) and episode_index
    meta/episodes.jsonl        {"episode_index", "tasks", "length"} per line
    meta/tasks.jsonl           {"task_index", "task"} per line
    meta/episodes_stats.jsonl  {"episode_index", "stats": {key: {min, max, mean, std, count}}}
                               (v2.1; v2.0 has only meta/stats.json: statistics are computed)
    data/chunk-000/episode_000000.parquet
    videos/chunk-000/<video_key>/episode_000000.mp4

`V21Source` hands the episodes to the v3.0 rebuilder (`rlctl dataset convert`);
`LeRobotV21Reader` is the `LegacyDatasetReader` port.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rlctl.adapters.storage.episode_source import (
    SourceEpisode,
    VideoSpan,
    dataset_root,
    parse_version,
)
from rlctl.adapters.storage.lerobot_v3.errors import (
    CORRUPT_HINT,
    INCOMPLETE_HINT,
    check_hint,
    read_json,
    read_text,
    reading,
)
from rlctl.adapters.storage.lerobot_v3.image_sampling import (
    downsample_step,
    sample_indices,
    uint8_channel_stats,
)
from rlctl.adapters.storage.lerobot_v3.images import decode_image
from rlctl.adapters.storage.lerobot_v3.paths import INFO_PATH
from rlctl.adapters.storage.lerobot_v3.tools.sources import episode_rows
from rlctl.adapters.storage.lerobot_v3.tools.video_spans import decode_span, video_facts
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import (
    CorruptDataset,
    DatasetNotFound,
    DatasetVersionError,
    InvalidInput,
)
from rlctl.domain.features import features_from_info
from rlctl.domain.statistics import FeatureStats

EPISODES_JSONL = "meta/episodes.jsonl"
TASKS_JSONL = "meta/tasks.jsonl"
EPISODES_STATS_JSONL = "meta/episodes_stats.jsonl"
V21_DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
V21_VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"


def read_jsonl(path: Path, what: str, root: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise CorruptDataset(
            f"the {what} is missing", where=str(path), hint=check_hint(root, INCOMPLETE_HINT)
        )
    lines = []
    with reading(path, what, root):
        for number, line in enumerate(read_text(path, what, root).splitlines(), 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as err:
                raise CorruptDataset(
                    f"the {what} is not valid JSON lines: {err.msg} at line {number}",
                    where=str(path),
                    hint=CORRUPT_HINT,
                ) from err
            if not isinstance(value, dict):
                raise CorruptDataset(
                    f"line {number} of the {what} is not a JSON object", where=str(path)
                )
            lines.append(value)
    return lines


def _field(entry: Mapping[str, Any], key: str, path: Path, number: int) -> Any:
    if key not in entry:
        raise CorruptDataset(
            f"line {number} has no {key!r}", where=f"{path}: {key}", hint=CORRUPT_HINT
        )
    return entry[key]


def read_legacy_meta(root: Path) -> DatasetMeta:
    """A v2.x dataset's metadata in v3.0 terms; `episodes[i].columns["source_index"]` is the
    episode's own index (v2.x datasets may skip numbers)."""
    path = root / INFO_PATH
    if not path.exists():
        raise DatasetNotFound(
            "no meta/info.json: this folder is not a LeRobot dataset",
            where=str(path),
            hint="give the dataset's root folder (the one holding meta/ and data/)",
        )
    info = read_json(path, "dataset info file", root)
    if not isinstance(info, dict):
        raise CorruptDataset("info.json must hold a JSON object", where=str(path))
    version = info.get("codebase_version")
    if parse_version(version, f"{path}: codebase_version")[0] != 2:
        raise DatasetVersionError(
            f"the dataset is in LeRobot format {version}, not v2.x",
            where=f"{path}: codebase_version",
            hint="only v2.0 and v2.1 datasets need converting; v3.0 ones are read as they are",
        )
    try:
        features = features_from_info(info.get("features") or {})
        fps = int(info["fps"])
    except (InvalidInput, KeyError, TypeError, ValueError) as err:
        raise CorruptDataset(
            f"info.json's features or fps cannot be read: {err}", where=str(path)
        ) from err
    tasks_path = root / TASKS_JSONL
    task_lines = read_jsonl(tasks_path, "tasks file", root)
    by_index = {
        int(_field(t, "task_index", tasks_path, n)): str(_field(t, "task", tasks_path, n))
        for n, t in enumerate(task_lines, 1)
    }
    if sorted(by_index) != list(range(len(by_index))):
        raise CorruptDataset(
            f"task_index must number the tasks 0..{len(by_index) - 1}",
            where=f"{tasks_path}: task_index",
        )
    episodes_path = root / EPISODES_JSONL
    lines = read_jsonl(episodes_path, "episodes file", root)
    lines.sort(key=lambda e: int(_field(e, "episode_index", episodes_path, 0)))
    records, start = [], 0
    for position, entry in enumerate(lines):
        length = int(_field(entry, "length", episodes_path, position + 1))
        records.append(
            EpisodeRecord(
                index=position,
                length=length,
                tasks=tuple(str(t) for t in entry.get("tasks") or ()),
                dataset_from_index=start,
                dataset_to_index=start + length,
                columns={"source_index": int(entry["episode_index"])},
            )
        )
        start += length
    return DatasetMeta(
        codebase_version=str(version),
        fps=fps,
        features=features,
        total_episodes=len(records),
        total_frames=start,
        tasks=tuple(by_index[i] for i in range(len(by_index))),
        episodes=tuple(records),
        robot_type=info.get("robot_type"),
        chunks_size=int(info.get("chunks_size") or 1000),
        data_path=str(info.get("data_path") or V21_DATA_PATH),
        video_path=info.get("video_path") or (V21_VIDEO_PATH if features else None),
        info=info,
    )


class LeRobotV21Reader:
    """`LegacyDatasetReader` for local v2.x folders."""

    def read_meta(self, location: str | Path) -> DatasetMeta:
        return read_legacy_meta(dataset_root(location))


class V21Source:
    """`EpisodeSource` over a v2.x folder: the rebuilder's view of a dataset being converted."""

    def __init__(self, root: Path) -> None:
        self._root = dataset_root(root)
        self._meta = read_legacy_meta(self._root)
        self._stats = self._read_episode_stats()
        self._durations: dict[Path, float] = {}

    @property
    def root(self) -> Path:
        return self._root

    @property
    def meta(self) -> DatasetMeta:
        return self._meta

    def _read_episode_stats(self) -> dict[int, dict[str, FeatureStats]]:
        path = self._root / EPISODES_STATS_JSONL
        if not path.is_file():  # v2.0: computed per episode instead
            return {}
        out = {}
        for number, line in enumerate(read_jsonl(path, "episode statistics file", self._root), 1):
            stats = _field(line, "stats", path, number)
            index = int(_field(line, "episode_index", path, number))
            try:
                out[index] = {
                    key: FeatureStats.from_json(entry, where=f"{path}: episode {index}: {key}")
                    for key, entry in stats.items()
                }
            except InvalidInput as err:
                raise CorruptDataset(err.message, where=err.where, hint=CORRUPT_HINT) from err
        return out

    def _source_index(self, index: int) -> int:
        if not 0 <= index < self._meta.total_episodes:
            raise InvalidInput(
                f"episode {index} does not exist: the dataset has {self._meta.total_episodes}",
                where=str(self._root),
            )
        return int(self._meta.episodes[index].columns["source_index"])

    def _path(self, template: str, source_index: int, **values: str) -> Path:
        chunk = source_index // self._meta.chunks_size
        return self._root / template.format(
            episode_chunk=chunk, episode_index=source_index, **values
        )

    def data_file(self, index: int) -> Path:
        return self._path(self._meta.data_path, self._source_index(index))

    def video_file(self, index: int, key: str) -> Path:
        assert self._meta.video_path is not None
        return self._path(self._meta.video_path, self._source_index(index), video_key=key)

    def episode(self, index: int) -> SourceEpisode:
        source_index = self._source_index(index)
        record = self._meta.episodes[index]
        videos = {}
        for key in self._meta.video_keys:
            path = self.video_file(index, key)
            videos[key] = VideoSpan(path, 0.0, self._duration(path))
        stats = dict(self._stats.get(source_index, {}))
        missing = [k for k in self._meta.visual_keys if k not in stats]
        if missing:
            stats.update(self._visual_stats(index, record.length, videos, missing))
        return SourceEpisode(
            index=index,
            length=record.length,
            tasks=record.tasks,
            stats=stats,
            videos=videos,
            data_file=self.data_file(index),
        )

    def rows(self, index: int) -> pa.Table:
        record = self._meta.episodes[index]
        return episode_rows(
            self.data_file(index), self._root, self._source_index(index), record.length
        )

    def _duration(self, path: Path) -> float:
        if path not in self._durations:
            self._durations[path] = video_facts(path).duration_s
        return self._durations[path]

    def _visual_stats(
        self, index: int, length: int, videos: Mapping[str, VideoSpan], keys: list[str]
    ) -> dict[str, FeatureStats]:
        """LeRobot's per-episode image statistics, for datasets that did not store them (v2.0)."""
        chosen = sample_indices(length)
        out = {}
        for key in keys:
            if key in videos:
                frames = decode_span(videos[key], self._meta.fps)
                picked = frames[np.minimum(chosen, len(frames) - 1)]
            else:
                column = self.rows(index).column(key).combine_chunks()
                blobs = column.field("bytes") if pa.types.is_struct(column.type) else column
                images = [decode_image(blobs[int(i)].as_py()) for i in chosen]
                picked = np.stack([im if im.ndim == 3 else im[:, :, None] for im in images])
            step = downsample_step(picked.shape[1], picked.shape[2])
            out[key] = uint8_channel_stats(np.ascontiguousarray(picked[:, ::step, ::step]))
        return out
