"""What the device commands share: picking the one device a command acts on, where a recording
goes, and how loop figures are shown. Keep it light: the commands' `--help` imports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import click

from rlctl.domain.errors import ConfigError
from rlctl.entrypoints.parts import RobotConfig, TeleoperatorConfig, lerobot_home

ControlsMode = Literal["keyboard", "off"]


def require_robot(robot: RobotConfig | None) -> RobotConfig:
    if robot is None:
        raise ConfigError(
            "no robot given",
            where="robot.type",
            hint="choose one, e.g. --robot.type=so101_follower --robot.port=/dev/ttyACM0 "
            "--robot.id=my_arm (or --robot.type=sim for a simulator)",
        )
    return robot


def one_device(
    robot: RobotConfig | None, teleop: TeleoperatorConfig | None
) -> tuple[Literal["robot", "teleop"], RobotConfig | TeleoperatorConfig]:
    """The single arm `calibrate` / `setup-motors` act on."""
    if (robot is None) == (teleop is None):
        raise ConfigError(
            "give either a robot or a teleoperator" + (", not both" if robot else ""),
            hint="e.g. --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=black, "
            "or --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue",
        )
    return ("robot", robot) if robot is not None else ("teleop", teleop)  # type: ignore[return-value]


def build_device(container: Any, kind: str, config: Any, *, cameras: bool = True) -> Any:
    if kind == "robot":
        return container.robot(config if cameras else config.without_cameras())
    return container.teleoperator(config)


def recording_root(root: str | None, repo_id: str) -> Path:
    """`--dataset.root`, else `$HF_LEROBOT_HOME/<repo_id>` as LeRobot records there."""
    if root:
        return Path(root).expanduser()
    if not repo_id:
        raise ConfigError(
            "no dataset location given",
            where="dataset",
            hint="give --dataset.repo_id=user/name (stored under $HF_LEROBOT_HOME) or "
            "--dataset.root=PATH",
        )
    return lerobot_home() / repo_id


def record_controls(container: Any, mode: ControlsMode) -> Any:
    controls = container.record_controls(mode == "keyboard")
    keys = getattr(controls, "keys", None)
    if keys:
        click.echo(f"controls: {keys}", err=True)
    return controls
