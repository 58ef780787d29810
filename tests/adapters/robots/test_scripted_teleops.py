"""Teleoperators with no hardware: a recorded episode played back, read from LeRobot's files."""

from __future__ import annotations

import numpy as np
import pytest

from rlctl.adapters.memory.episode_actions import InMemoryEpisodeActions
from rlctl.adapters.storage.lerobot_v3.episode_actions import LeRobotEpisodeActions
from rlctl.adapters.teleop.episode_replay import EpisodeReplayTeleop
from rlctl.application.ports.teleoperator import RecordedEpisode
from rlctl.domain.errors import InvalidInput


def test_a_replayed_episode_holds_its_last_action_and_starts_over_each_episode():
    actions = np.arange(6, dtype=np.float32).reshape(3, 2)
    episodes = InMemoryEpisodeActions(
        {("ds", 4): RecordedEpisode(4, fps=10, actions=actions, names=["a.pos", "b.pos"])}
    )
    teleop = EpisodeReplayTeleop(episodes, "ds", 4)
    assert teleop.action_features["action"].names == ["a.pos", "b.pos"]
    teleop.connect()
    played = [teleop.get_action({}) for _ in range(5)]
    np.testing.assert_array_equal(np.stack(played), actions[[0, 1, 2, 2, 2]])
    teleop.reset()
    np.testing.assert_array_equal(teleop.get_action({}), actions[0])


def test_the_actions_of_an_episode_lerobot_recorded(fixtures_dir):
    root = str(fixtures_dir / "sim_video")
    episode = LeRobotEpisodeActions().read(root, 1)
    assert episode.fps == 10 and episode.robot_type == "so101_follower"
    assert episode.actions.dtype == np.float32 and episode.actions.shape[1] == 6
    assert len(episode) > 0 and episode.names is not None and len(episode.names) == 6
    with pytest.raises(InvalidInput, match="episode 9 does not exist"):
        LeRobotEpisodeActions().read(root, 9)
