"""The episode being recorded: its rows in memory, its camera frames already on their way.

Numeric and string values are kept per key until the episode is saved. Video frames go straight
to the camera's encoder and image frames to a PNG thread pool, so saving an episode has no media
left to process; image features also keep a few shrunk frames for the episode's statistics.
Depth cameras get LeRobot's depth encoding (from their `info`) and, stored as images, raw TIFFs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import numpy as np

from rlctl.adapters.storage.lerobot_v3.commit import CommitJob
from rlctl.adapters.storage.lerobot_v3.frame_validation import ValidFrame
from rlctl.adapters.storage.lerobot_v3.image_sampling import FrameSampler
from rlctl.adapters.storage.lerobot_v3.png import encode_depth_tiff, encode_png
from rlctl.adapters.storage.lerobot_v3.video_worker import EncodedEpisode, EpisodeEncoder
from rlctl.domain.depth import infer_depth_unit
from rlctl.domain.features import DEFAULT_FEATURE_KEYS, FeatureSpec
from rlctl.domain.video import VideoEncoding


class EpisodeBuffer:
    """Collects the frames of one episode; `close` turns them into a `CommitJob`."""

    def __init__(
        self,
        *,
        episode_index: int,
        features: Mapping[str, FeatureSpec],
        fps: int,
        encoders: Mapping[str, EpisodeEncoder],
        encoding: VideoEncoding,
        staging: Path,
        png_pool: Executor,
        png_compress_level: int,
    ) -> None:
        self.episode_index = episode_index
        self.length = 0
        self._fps = fps
        self._encoders = encoders
        self._encodings = {
            key: VideoEncoding.from_info(features[key].info)
            if features[key].is_depth_map
            else encoding
            for key in encoders
        }
        self._staging = staging
        self._png_pool = png_pool
        self._png_level = png_compress_level
        user = {k: f for k, f in features.items() if k not in DEFAULT_FEATURE_KEYS}
        self._shapes = {k: f.shape for k, f in user.items() if not f.is_visual}
        self._values: dict[str, list[Any]] = {k: [] for k in self._shapes}
        self._image_keys = [k for k, f in user.items() if f.is_image]
        self._image_encoders = {
            k: encode_depth_tiff if user[k].is_depth_map else encode_png for k in self._image_keys
        }
        self._depth_keys = [k for k, f in user.items() if f.is_depth_map]
        self._depth_units: dict[str, str] = {}
        self._pngs: dict[str, list[Future[bytes]]] = {k: [] for k in self._image_keys}
        # Video statistics come from the encoders, which see every frame anyway.
        self._samplers = {k: FrameSampler() for k in self._image_keys}
        self._tasks: list[str] = []

    def video_path(self, key: str) -> Path:
        return self._staging / key / f"episode-{self.episode_index:06d}.mp4"

    def add(self, frame: ValidFrame) -> None:
        if self.length == 0:
            for key, encoder in self._encoders.items():
                self.video_path(key).parent.mkdir(parents=True, exist_ok=True)
                encoder.begin(self.video_path(key), self._fps, self._encodings[key])
            for key in self._depth_keys:
                self._depth_units[key] = infer_depth_unit(frame.values[key].dtype)
        values = frame.values
        for key, column in self._values.items():
            column.append(values[key])
        for key, encoder in self._encoders.items():
            encoder.add_frame(values[key])
        for key, pngs in self._pngs.items():
            pngs.append(
                self._png_pool.submit(self._image_encoders[key], values[key], self._png_level)
            )
        for key, sampler in self._samplers.items():
            sampler.add(values[key])
        self._tasks.append(frame.task)
        self.length += 1

    def close(
        self,
        *,
        dataset_from_index: int,
        task_index: Callable[[str], int],
        all_tasks: Callable[[], tuple[str, ...]],
    ) -> CommitJob:
        """The saved episode as a job for the committer; `task_index` numbers (new) tasks."""
        length = self.length
        task_indices = np.array([task_index(task) for task in self._tasks], dtype=np.int64)
        timestamps = np.arange(length, dtype=np.float64) / self._fps
        columns: dict[str, Any] = {}
        for key, column in self._values.items():
            if isinstance(column[0], (str, list)):  # text, or language rows
                columns[key] = column
                continue
            stacked = np.stack(column)
            columns[key] = stacked.reshape(length) if self._shapes[key] in ((), (1,)) else stacked
        columns["timestamp"] = timestamps.astype(np.float32)
        columns["frame_index"] = np.arange(length, dtype=np.int64)
        columns["episode_index"] = np.full(length, self.episode_index, dtype=np.int64)
        columns["index"] = np.arange(
            dataset_from_index, dataset_from_index + length, dtype=np.int64
        )
        columns["task_index"] = task_indices
        videos: dict[str, Future[EncodedEpisode]] = {
            key: encoder.end() for key, encoder in self._encoders.items()
        }
        return CommitJob(
            episode_index=self.episode_index,
            dataset_from_index=dataset_from_index,
            length=length,
            tasks=tuple(dict.fromkeys(self._tasks)),
            all_tasks=all_tasks(),
            columns=columns,
            stats_columns={"timestamp": timestamps},
            images=self._pngs,
            videos=videos,
            samplers=self._samplers,
            depth_units=dict(self._depth_units),
        )

    def discard(self) -> None:
        """Forget the frames; the cameras drop what they encoded of this episode."""
        if self.length:
            for encoder in self._encoders.values():
                encoder.abort()
        for pngs in self._pngs.values():
            for future in pngs:
                future.cancel()
