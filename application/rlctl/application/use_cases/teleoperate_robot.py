"""`TeleoperateRobot`: a teleoperator drives the robot at a fixed rate; nothing is stored.

Runs for `duration_s` (forever when None) or until a control (any of next/stop) or Ctrl-C; the
devices are always disconnected. The report says how well the rate was kept.
"""

from __future__ import annotations

import attrs
import structlog

from rlctl.application.control_loop import (
    LoopStats,
    Ticker,
    loop_interpreter,
    progress_task,
    ticks_for,
)
from rlctl.application.devices import Calibrate, connect_devices, disconnect_devices
from rlctl.application.ports.clock import Clock
from rlctl.application.ports.control import RecordControls
from rlctl.application.ports.live_display import LiveDisplay
from rlctl.application.ports.progress import Progress
from rlctl.application.ports.robot import Robot
from rlctl.application.ports.teleoperator import Teleoperator
from rlctl.application.robot_features import check_action_match

log = structlog.get_logger(__name__)

# How often the progress line shows the rate actually kept.
_RATE_EVERY_TICKS = 30


@attrs.frozen
class TeleopReport:
    ticks: int
    interrupted: bool
    timing: LoopStats


class TeleoperateRobot:
    def __init__(
        self,
        robot: Robot,
        teleop: Teleoperator,
        clock: Clock,
        controls: RecordControls | None = None,
        *,
        progress: Progress | None = None,
        calibrate: Calibrate | None = None,
        owns_process: bool = False,
        display: LiveDisplay | None = None,
    ) -> None:
        check_action_match(robot.action_features, teleop.action_features, what="the teleop")
        self._robot = robot
        self._teleop = teleop
        self._clock = clock
        self._controls = controls
        self._progress = progress
        self._calibrate = calibrate
        self._owns_process = owns_process  # see `control_loop.loop_interpreter`
        self._display = display  # `--display_data=true`: every tick shown

    def __call__(self, *, fps: int = 60, duration_s: float | None = None) -> TeleopReport:
        with loop_interpreter(self._robot.realtime, owns_process=self._owns_process):
            return self._teleoperate(fps, duration_s)

    def _teleoperate(self, fps: int, duration_s: float | None) -> TeleopReport:
        ticker = Ticker(self._clock, fps, realtime=self._robot.realtime)
        limit = None if duration_s is None else ticks_for(duration_s, fps, what="duration_s")
        interrupted = False
        bar = progress_task(self._progress, "teleoperating", limit)
        display = self._display
        try:
            if display is not None:
                features = {**self._robot.observation_features, **self._robot.action_features}
                display.open(features, fps=fps, name="teleoperate", paced=self._robot.realtime)
            connect_devices(self._robot, self._teleop, self._calibrate)
            self._teleop.reset()
            self._robot.reset()
            while limit is None or ticker.count < limit:
                ticker.tick()
                if self._controls is not None and self._controls.poll():
                    break
                observation = self._robot.get_observation()
                sent = self._robot.send_action(self._teleop.get_action(observation))
                if display is not None:
                    display.log_frame(ticker.count - 1, observation, sent)
                bar.advance()
                if ticker.count % _RATE_EVERY_TICKS == 0 and ticker.periods:
                    recent = ticker.periods[-_RATE_EVERY_TICKS:]
                    bar.update(hz=round(len(recent) / sum(recent), 1))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            bar.close()
            disconnect_devices(self._robot, self._teleop)
            if self._controls is not None:
                self._controls.close()
            if display is not None:
                display.close()
        stats = ticker.stats()
        log.info("teleoperation ended", ticks=stats.ticks, timing=stats.describe())
        return TeleopReport(ticks=stats.ticks, interrupted=interrupted, timing=stats)
