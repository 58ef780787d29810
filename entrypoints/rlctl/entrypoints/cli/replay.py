"""`rlctl replay`: send a recorded episode's actions to a robot (LeRobot's `lerobot-replay`).

    rlctl replay --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=black \\
        --dataset.repo_id=me/cubes --dataset.episode=0

`--dataset.repo_id` may name a dataset on the Hub (pulled into LeRobot's cache) or under
$HF_LEROBOT_HOME; `--dataset.root` a folder.
"""

from __future__ import annotations

import attrs
import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.parts import RobotConfig
from rlctl.entrypoints.settings import AppSettings, DatasetSettings


@attrs.frozen(kw_only=True)
class ReplayDatasetSettings(DatasetSettings):
    repo_id: str = ""
    root: str | None = None
    episode: int = 0


@attrs.frozen(kw_only=True)
class ReplayCommandSettings(AppSettings):
    robot: RobotConfig | None = None
    dataset: ReplayDatasetSettings = attrs.field(factory=ReplayDatasetSettings)
    calibrate: bool = True


@settings_command("replay")
@config_options(ReplayCommandSettings)
@click.pass_context
def replay_command(ctx: click.Context, config: ReplayCommandSettings) -> None:
    """Replay the actions of one recorded episode on a robot, at the dataset's rate."""
    from rlctl.domain.errors import ConfigError
    from rlctl.entrypoints.cli.devices import require_robot
    from rlctl.entrypoints.container import build_container

    ds = config.dataset
    location = ds.root or ds.repo_id
    if not location:
        raise ConfigError(
            "no dataset given",
            where="dataset",
            hint="--dataset.repo_id=user/name or --dataset.root=PATH, and --dataset.episode=N",
        )
    container = build_container(config, owns_process=True)  # the loop may tune the interpreter
    root = (
        container.resolve_dataset()(location, episodes=(ds.episode,)) if not ds.root else location
    )
    use_case = container.replay_episode(
        robot=container.robot(require_robot(config.robot)),
        calibrate=container.calibrate_robot() if config.calibrate else None,
    )
    report = use_case(str(root), ds.episode)
    click.echo(
        f"replayed episode {report.episode_index}: {report.frames_sent} actions, "
        f"{report.timing.describe()}"
    )
    if report.interrupted:
        ctx.exit(130)
