"""The actions of one episode of a LeRobot v3.0 dataset, read from its data file alone.

Replay needs only the `action` column: no video is opened, so a long episode of a dataset with
several cameras is ready in milliseconds.
"""

from __future__ import annotations

import numpy as np

from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader, dataset_root
from rlctl.adapters.storage.lerobot_v3.table import load_frame_table
from rlctl.application.ports.teleoperator import RecordedEpisode
from rlctl.domain.errors import InvalidInput

ACTION_KEY = "action"


class LeRobotEpisodeActions:
    def read(self, location: str, episode_index: int) -> RecordedEpisode:
        root = dataset_root(location)
        meta = LeRobotMetaReader().read_meta(str(root))
        spec = meta.features.get(ACTION_KEY)
        if spec is None:
            raise InvalidInput(
                "the dataset has no 'action' feature to replay",
                where=str(root),
                hint=f"its features are {', '.join(meta.features)}",
            )
        records = [e for e in meta.episodes if e.index == episode_index]
        if not records:
            raise InvalidInput(
                f"episode {episode_index} does not exist ({meta.total_episodes} episodes, "
                f"0..{meta.total_episodes - 1})",
                where=str(root),
                hint="pick an episode with --dataset.episode=N",
            )
        table = load_frame_table(root, meta, records)
        actions = np.asarray(table.numeric[ACTION_KEY], dtype=np.float32)
        actions = actions.reshape(len(actions), -1)
        names = spec.names if isinstance(spec.names, list) else None
        return RecordedEpisode(
            episode_index=episode_index,
            fps=meta.fps,
            actions=actions,
            names=names,
            tasks=records[0].tasks,
            robot_type=meta.robot_type,
        )
