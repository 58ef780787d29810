"""`ReplayEpisode`: send a recorded episode's actions to the robot at the dataset's rate.

The actions must be for this robot (same size, same joint names when both name them); a dataset
recorded by another robot type is replayed with a warning, since names are what really matter.
"""

from __future__ import annotations

import attrs
import numpy as np
import structlog

from rlctl.application.control_loop import LoopStats, Ticker, loop_interpreter, progress_task
from rlctl.application.devices import Calibrate, connect_devices, disconnect_devices
from rlctl.application.ports.clock import Clock
from rlctl.application.ports.progress import Progress
from rlctl.application.ports.robot import ACTION_KEY, Robot
from rlctl.application.ports.teleoperator import EpisodeActions, RecordedEpisode
from rlctl.application.robot_features import check_action_match
from rlctl.domain.features import FeatureSpec

log = structlog.get_logger(__name__)


@attrs.frozen
class ReplayReport:
    episode_index: int
    frames_sent: int
    interrupted: bool
    timing: LoopStats


class ReplayEpisode:
    def __init__(
        self,
        robot: Robot,
        episodes: EpisodeActions,
        clock: Clock,
        *,
        progress: Progress | None = None,
        calibrate: Calibrate | None = None,
        owns_process: bool = False,
    ) -> None:
        self._robot = robot
        self._episodes = episodes
        self._clock = clock
        self._progress = progress
        self._calibrate = calibrate
        self._owns_process = owns_process  # see `control_loop.loop_interpreter`

    def __call__(self, location: str, episode_index: int) -> ReplayReport:
        episode = self._episodes.read(location, episode_index)
        recorded = FeatureSpec(
            ACTION_KEY,
            "float32",
            episode.actions.shape[1:],
            names=list(episode.names) if episode.names else None,
        )
        check_action_match(
            self._robot.action_features, {ACTION_KEY: recorded}, what=f"episode {episode_index}"
        )
        if episode.robot_type and episode.robot_type != self._robot.robot_type:
            log.warning(
                "the episode was recorded by another robot type",
                recorded=episode.robot_type,
                replaying_on=self._robot.robot_type,
            )
        with loop_interpreter(self._robot.realtime, owns_process=self._owns_process):
            return self._replay(episode, episode_index)

    def _replay(self, episode: RecordedEpisode, episode_index: int) -> ReplayReport:
        ticker = Ticker(self._clock, episode.fps, realtime=self._robot.realtime)
        sent = 0
        interrupted = False
        bar = progress_task(self._progress, f"replaying episode {episode_index}", len(episode))
        try:
            connect_devices(self._robot, None, self._calibrate)
            self._robot.reset()
            for action in np.asarray(episode.actions, dtype=np.float32):
                ticker.tick()
                self._robot.send_action(action)
                sent += 1
                bar.advance()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            bar.close()
            disconnect_devices(self._robot)
        return ReplayReport(episode_index, sent, interrupted, ticker.stats())
