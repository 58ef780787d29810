"""Port for reading one episode's recorded values and where its camera videos are.

The dataset viewer plots an episode's state and action columns beside its videos: it needs the
columns of a single episode (not a training view over the whole dataset) and, per camera, the
video file with the span of it that holds the episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs
import numpy as np


@attrs.frozen
class VideoClip:
    """The part of a camera's video file that holds one episode.

    `file` is the path relative to the dataset's root, with `/` separators; the episode's first
    frame is at `start_s` in it and its last ends at `end_s` (LeRobot's `from_timestamp` and
    `to_timestamp` in `meta/episodes`).
    """

    key: str
    file: str
    start_s: float
    end_s: float


class EpisodeDataReader(Protocol):
    def read_columns(
        self, location: str, episode_index: int, keys: Sequence[str]
    ) -> Mapping[str, np.ndarray]:
        """Each asked column of the episode's rows in frame order: `(frames,)` for scalars,
        `(frames, *shape)` otherwise; string columns as object arrays of `str`."""
        ...

    def video_clips(self, location: str, episode_index: int) -> Sequence[VideoClip]:
        """One clip per video feature, in the order of the dataset's features."""
        ...

    def frame_image(self, location: str, episode_index: int, key: str, frame: int) -> bytes:
        """The stored picture of an image feature (not a video) at one frame of the episode:
        the encoded file as the dataset holds it (PNG, JPEG)."""
        ...

    def root(self, location: str) -> str:
        """The local folder the clip files are relative to."""
        ...
