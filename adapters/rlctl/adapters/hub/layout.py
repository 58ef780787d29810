"""`DatasetLayout` for LeRobot v3.0: which files hold which episodes, by `meta/episodes`' rows."""

from __future__ import annotations

from collections.abc import Sequence

from rlctl.adapters.storage.lerobot_v3.paths import (
    episode_data_file,
    episode_video_file,
)
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import InvalidInput

# Everything a reader opens before choosing episodes: info, stats, tasks, the episodes table.
METADATA_PATTERNS = ("meta/",)


class LeRobotLayout:
    def metadata_patterns(self) -> tuple[str, ...]:
        return METADATA_PATTERNS

    def episode_files(
        self, meta: DatasetMeta, episodes: Sequence[int], *, videos: bool = True
    ) -> list[str]:
        by_index = {episode.index: episode for episode in meta.episodes}
        files: dict[str, None] = {}
        for index in episodes:
            episode = by_index.get(index)
            if episode is None:
                raise InvalidInput(
                    f"episode {index} is not in meta/episodes ({len(by_index)} episodes)",
                    where="--episodes",
                )
            files[episode_data_file(meta, episode).as_posix()] = None
            for key in meta.video_keys if videos else ():
                files[episode_video_file(meta, episode, key).as_posix()] = None
        return list(files)
