"""A recorded episode as a teleoperator: its actions one per tick, the last one held after the
end, from the start again at each new episode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlctl.adapters.teleop.config import ReplayTeleopConfig
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.ports.teleoperator import EpisodeActions, RecordedEpisode
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec


class EpisodeReplayTeleop:
    def __init__(self, episodes: EpisodeActions, location: str, episode_index: int) -> None:
        self._episodes = episodes
        self._location = location
        self._index = episode_index
        self._episode: RecordedEpisode | None = None
        self._tick = 0

    @property
    def teleop_type(self) -> str:
        return "replay"

    @property
    def episode(self) -> RecordedEpisode:
        if self._episode is None:
            self._episode = self._episodes.read(self._location, self._index)
        return self._episode

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        episode = self.episode
        names = list(episode.names) if episode.names else None
        return {ACTION_KEY: FeatureSpec(ACTION_KEY, "float32", episode.actions.shape[1:], names)}

    @property
    def is_connected(self) -> bool:
        return self._episode is not None

    def connect(self) -> None:
        self.episode  # noqa: B018 - reads the episode now, so a bad dataset fails at connect

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        self._tick = 0

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        actions = self.episode.actions
        action = actions[min(self._tick, len(actions) - 1)]
        self._tick += 1
        return np.asarray(action, dtype=np.float32)

    def disconnect(self) -> None:
        self._episode = None


def dataset_location(dataset: str) -> str:
    """A folder as it is; a repo id (`user/name`) as its folder under $HF_LEROBOT_HOME."""
    if not dataset:
        raise ConfigError("no dataset given", where="teleop.dataset", hint="--teleop.dataset=PATH")
    path = Path(dataset).expanduser()
    if path.exists():
        return str(path)
    from rlctl.adapters.hub.settings import HubSettings

    return str(HubSettings.from_environment().lerobot_home / dataset)


def episode_replay(
    config: ReplayTeleopConfig, *, calibration_store: CalibrationStore | None = None
) -> EpisodeReplayTeleop:
    from rlctl.adapters.storage.lerobot_v3.episode_actions import LeRobotEpisodeActions

    return EpisodeReplayTeleop(
        LeRobotEpisodeActions(), dataset_location(config.dataset), config.episode
    )
