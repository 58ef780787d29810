"""`rlctl calibrate`: calibrate an arm and save it where LeRobot keeps calibrations.

    rlctl calibrate --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=black
    rlctl calibrate --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue
    rlctl calibrate --teleop.type=unitree_g1 --teleop.id=exo \\
        --teleop.left_arm_config.port=/dev/ttyACM0 --teleop.right_arm_config.port=/dev/ttyACM1

The file is `~/.cache/huggingface/lerobot/calibration/<robots|teleoperators>/<type>/<id>.json`
(`HF_LEROBOT_CALIBRATION` moves it), so LeRobot and rlctl share it. With a saved calibration,
Enter reuses it and `c` calibrates again (`--reuse=yes|no` answers for you).
"""

from __future__ import annotations

from typing import Literal

import attrs
import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.parts import RobotConfig, TeleoperatorConfig
from rlctl.entrypoints.settings import AppSettings


@attrs.frozen(kw_only=True)
class CalibrateCommandSettings(AppSettings):
    robot: RobotConfig | None = None
    teleop: TeleoperatorConfig | None = None
    reuse: Literal["ask", "yes", "no"] = "ask"


@settings_command("calibrate")
@config_options(CalibrateCommandSettings)
def calibrate_command(config: CalibrateCommandSettings) -> None:
    """Calibrate a robot or teleoperator arm: homing, then ranges of motion."""
    from rlctl.application.devices import disconnect_devices
    from rlctl.application.ports.teleoperator import SelfCalibrating
    from rlctl.entrypoints.cli.devices import build_device, one_device
    from rlctl.entrypoints.container import build_container

    kind, device_config = one_device(config.robot, config.teleop)
    container = build_container(config)
    device = build_device(container, kind, device_config, cameras=False)
    if isinstance(device, SelfCalibrating):
        # Its calibration is not a motor bus's ranges: it guides the person itself.
        for where in device.calibrate_with(container.console(), reuse=config.reuse):
            click.echo(f"saved {where}")
        return
    targets = device.calibration_targets()
    if not targets:
        click.echo(f"{device_config.type_name} has nothing to calibrate")
        return
    calibrate = container.calibrate_robot()
    device.connect()
    try:
        for target in targets:
            outcome = calibrate(target, reuse=config.reuse)
            if outcome.reused:
                click.echo(f"{outcome.target}: using the saved calibration")
    finally:
        disconnect_devices(device)
