"""`rlctl teleoperate`: drive a robot from a teleoperator, storing nothing.

    rlctl teleoperate --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=black \\
        --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue --fps=60

Runs until `--teleop_time_s` passes, Esc / q is pressed, or Ctrl-C. `--display_data=true`
shows the cameras, joints and actions live in rerun.
"""

from __future__ import annotations

import attrs
import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.cli.devices import ControlsMode
from rlctl.entrypoints.parts import DisplaySettings, RobotConfig, TeleoperatorConfig
from rlctl.entrypoints.settings import AppSettings


@attrs.frozen(kw_only=True)
class TeleoperateCommandSettings(AppSettings):
    robot: RobotConfig | None = None
    teleop: TeleoperatorConfig | None = None
    fps: int = 60
    # None: until stopped.
    teleop_time_s: float | None = None
    controls: ControlsMode = "keyboard"
    calibrate: bool = True
    # Show cameras, joints and actions live in rerun (see display.*).
    display_data: bool = False
    display: DisplaySettings = attrs.field(factory=DisplaySettings)


@settings_command("teleoperate")
@config_options(TeleoperateCommandSettings)
@click.pass_context
def teleoperate_command(ctx: click.Context, config: TeleoperateCommandSettings) -> None:
    """Drive a robot from a teleoperator at a fixed rate."""
    from rlctl.domain.errors import ConfigError
    from rlctl.entrypoints.cli.devices import record_controls, require_robot
    from rlctl.entrypoints.container import build_container

    if config.teleop is None:
        raise ConfigError(
            "no teleoperator given",
            where="teleop.type",
            hint="e.g. --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue",
        )
    container = build_container(config, owns_process=True)  # the loop may tune the interpreter
    use_case = container.teleoperate_robot(
        robot=container.robot(require_robot(config.robot)),
        teleop=container.teleoperator(config.teleop.paired_with(config.robot)),
        controls=record_controls(container, config.controls),
        calibrate=container.calibrate_robot() if config.calibrate else None,
    )
    report = use_case(fps=config.fps, duration_s=config.teleop_time_s)
    click.echo(f"teleoperated: {report.timing.describe()}")
    if report.interrupted:
        ctx.exit(130)
