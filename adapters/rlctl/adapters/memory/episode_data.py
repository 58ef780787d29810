"""Episode columns of datasets recorded in memory (`InMemoryDatasetWriter`); no videos."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from rlctl.adapters.memory.dataset_writer import InMemoryDatasetWriter
from rlctl.application.ports.episode_data import VideoClip
from rlctl.domain.errors import DatasetNotFound, InvalidInput


class InMemoryEpisodeData:
    def __init__(self, writer: InMemoryDatasetWriter) -> None:
        self._writer = writer

    def _frames(self, location: str, episode_index: int) -> tuple:
        dataset = self._writer.datasets.get(Path(location))
        if dataset is None:
            raise DatasetNotFound("no dataset recorded here", where=location)
        if not 0 <= episode_index < len(dataset.frames):
            raise InvalidInput(
                f"episode {episode_index} does not exist ({len(dataset.frames)} episodes)",
                where=location,
            )
        return dataset.fps, dataset.frames[episode_index]

    def read_columns(
        self, location: str, episode_index: int, keys: Sequence[str]
    ) -> Mapping[str, np.ndarray]:
        fps, frames = self._frames(location, episode_index)
        out: dict[str, np.ndarray] = {}
        for key in keys:
            if key == "timestamp":
                out[key] = np.arange(len(frames), dtype=np.float64) / fps
            elif key == "frame_index":
                out[key] = np.arange(len(frames), dtype=np.int64)
            elif key == "task":
                out[key] = np.array([f.task for f in frames], dtype=object)
            else:
                values = [f.values[key] for f in frames]
                out[key] = (
                    np.array(values, dtype=object)
                    if values and isinstance(values[0], str)
                    else np.stack([np.asarray(v) for v in values])
                )
        return out

    def video_clips(self, location: str, episode_index: int) -> Sequence[VideoClip]:
        self._frames(location, episode_index)
        return ()

    def frame_image(self, location: str, episode_index: int, key: str, frame: int) -> bytes:
        import io

        from PIL import Image

        _, frames = self._frames(location, episode_index)
        if not 0 <= frame < len(frames) or key not in frames[frame].values:
            raise InvalidInput(f"no picture {key!r} at frame {frame}", where=location)
        buffer = io.BytesIO()
        Image.fromarray(np.asarray(frames[frame].values[key], np.uint8)).save(buffer, "PNG")
        return buffer.getvalue()

    def root(self, location: str) -> str:
        return location
