"""`rlctl setup-motors`: give each motor of a new arm its id and baud rate, one at a time.

    rlctl setup-motors --robot.type=so101_follower --robot.port=/dev/ttyACM0
    rlctl setup-motors --teleop.type=koch_leader --teleop.port=/dev/ttyUSB0

Connect the controller board to one motor at a time when asked, starting with the gripper.
"""

from __future__ import annotations

import attrs
import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.parts import RobotConfig, TeleoperatorConfig
from rlctl.entrypoints.settings import AppSettings


@attrs.frozen(kw_only=True)
class SetupMotorsCommandSettings(AppSettings):
    robot: RobotConfig | None = None
    teleop: TeleoperatorConfig | None = None


@settings_command("setup-motors")
@config_options(SetupMotorsCommandSettings)
def setup_motors_command(config: SetupMotorsCommandSettings) -> None:
    """Set the id and baud rate of each motor of an arm, one motor at a time."""
    from rlctl.entrypoints.cli.devices import build_device, one_device
    from rlctl.entrypoints.container import build_container

    kind, device_config = one_device(config.robot, config.teleop)
    container = build_container(config)
    device = build_device(container, kind, device_config, cameras=False)
    targets = device.calibration_targets()
    if not targets:
        click.echo(f"{device_config.type_name} has no motors to set up")
        return
    setup = container.setup_motors()
    for target in targets:
        if len(targets) > 1:  # a bimanual device: say which arm's board to connect
            click.echo(f"{target.calibration_key.label}, on {target.bus.port}:")
        done = setup(target)
        click.echo(f"{target.calibration_key.label}: {len(done)} motors set up")
