"""Recorded episodes held in memory, for replay tests; or read from an in-memory dataset."""

from __future__ import annotations

import numpy as np

from rlctl.adapters.memory.dataset_writer import InMemoryDatasetWriter
from rlctl.application.ports.teleoperator import RecordedEpisode
from rlctl.domain.errors import DatasetNotFound, InvalidInput


class InMemoryEpisodeActions:
    def __init__(
        self,
        episodes: dict[tuple[str, int], RecordedEpisode] | None = None,
        *,
        writer: InMemoryDatasetWriter | None = None,
    ) -> None:
        """Episodes given directly, else those recorded by `writer` (an in-memory dataset)."""
        self._episodes = dict(episodes or {})
        self._writer = writer

    def read(self, location: str, episode_index: int) -> RecordedEpisode:
        if (location, episode_index) in self._episodes:
            return self._episodes[(location, episode_index)]
        if self._writer is not None:
            return self._from_writer(location, episode_index)
        raise DatasetNotFound(f"no episode {episode_index} here", where=location)

    def _from_writer(self, location: str, episode_index: int) -> RecordedEpisode:
        from pathlib import Path

        dataset = self._writer.datasets.get(Path(location)) if self._writer else None
        if dataset is None:
            raise DatasetNotFound("no dataset recorded here", where=location)
        if not 0 <= episode_index < len(dataset.frames):
            raise InvalidInput(
                f"episode {episode_index} does not exist ({len(dataset.frames)} episodes)",
                where=location,
            )
        frames = dataset.frames[episode_index]
        spec = dataset.features["action"]
        return RecordedEpisode(
            episode_index=episode_index,
            fps=dataset.fps,
            actions=np.stack([np.asarray(f.values["action"], np.float32) for f in frames]),
            names=list(spec.names) if spec.names else None,
            tasks=dataset.episodes[episode_index].tasks,
            robot_type=dataset.robot_type,
        )
