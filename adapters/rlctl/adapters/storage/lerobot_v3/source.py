"""`DatasetSource` for LeRobot v3.0 folders: what the container wires for reading datasets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from rlctl.adapters.storage.lerobot_v3.decoders import backend_name
from rlctl.adapters.storage.lerobot_v3.reader import ImageTransform, LeRobotDatasetReader


class LeRobotDatasetSource:
    """Opens local LeRobot v3.0 datasets with one video backend ('auto', 'pyav', 'torchcodec')."""

    def __init__(self, video_backend: str | None = None) -> None:
        self.video_backend = backend_name(video_backend)

    def open(
        self,
        location: str | Path,
        *,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        episodes: Iterable[int] | None = None,
        image_transforms: ImageTransform | None = None,
    ) -> LeRobotDatasetReader:
        return LeRobotDatasetReader(
            location,
            delta_timestamps=delta_timestamps,
            episodes=episodes,
            video_backend=self.video_backend,
            image_transforms=image_transforms,
        )
