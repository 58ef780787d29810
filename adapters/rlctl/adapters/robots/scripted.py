"""`--robot.type=scripted` and `--teleop.type=scripted`: the in-memory robot and teleoperator
behind the CLI, for dry runs of the whole pipeline (dataset, cameras, encoding) with no arm."""

from __future__ import annotations

from rlctl.adapters.cameras.config import build_cameras
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.memory.teleoperator import ScriptedTeleoperator, sine_script
from rlctl.adapters.robots.config import ScriptedRobotConfig
from rlctl.adapters.teleop.config import ScriptedTeleopConfig
from rlctl.application.ports.robot import CalibrationStore

# The script's period is counted in ticks; at the loops' usual 30 fps.
_TICKS_PER_SECOND = 30


def scripted_robot(
    config: ScriptedRobotConfig, *, calibration_store: CalibrationStore | None = None
) -> ScriptedRobot:
    for name, camera in config.cameras.items():
        camera.frame_size(name)  # a camera without a size is refused before anything starts
    return ScriptedRobot(
        config.joints,
        build_cameras(config.cameras),
        max_relative_target=config.max_relative_target,
        realtime=config.realtime,
    )


def scripted_teleop(
    config: ScriptedTeleopConfig, *, calibration_store: CalibrationStore | None = None
) -> ScriptedTeleoperator:
    script = sine_script(
        len(config.joints),
        period_ticks=max(1, round(config.period_s * _TICKS_PER_SECOND)),
        amplitude=config.amplitude,
    )
    return ScriptedTeleoperator(config.joints, script)
