"""`rlctl rollout`: deploy a trained policy on a robot, watch it, correct it, record it
(LeRobot 0.6.1's `lerobot-rollout`, with its settings' names).

    rlctl rollout --strategy.type=base --policy.path=outputs/act/checkpoints/last \\
        --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=black \\
        --task="Grab the cube" --duration=60

    rlctl rollout --strategy.type=dagger --policy.path=me/smolvla_cubes --inference.type=rtc \\
        --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=black \\
        --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue \\
        --dataset.repo_id=me/rollout_cubes --dataset.num_episodes=10 --task="Grab the cube"

Strategies: `base` (the policy acts, nothing stored), `sentry` (every tick stored, cut into
episodes, uploaded every `--strategy.upload_every_n_episodes` with `--dataset.push_to_hub`),
`highlight` (a ring buffer: `s` stores the last `--strategy.ring_buffer_seconds` and records on
until `s` again; `h` uploads), `dagger` (space pauses / resumes the policy, tab starts / ends a
correction with the teleoperator, enter uploads; corrections are tagged `intervention=True`),
`episodic` (`rlctl record` with the policy acting: episodes and reset phases, → next,
← re-record). Esc (or q) stops; Ctrl-C keeps every episode saved and the one under way.

Inference: `sync` runs the model in the loop's tick; `async` and `rtc` run it in the acting
engine's worker while the loop acts from its queue (the tick never waits for the model; a tick
without a fresh action holds the arm and is counted); `--policy.server=HOST:PORT` computes the
chunks on `rlctl policy serve` with the same engine. Every command goes through the robot's
safety guard; the action recorded is the one sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import click

from rlctl.domain.errors import ConfigError
from rlctl.domain.rollout import (
    BaseStrategyConfig,
    InferenceConfig,
    RolloutStrategyConfig,
    SyncInferenceConfig,
)
from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.cli.devices import ControlsMode
from rlctl.entrypoints.cli.record import EXIT_INTERRUPTED, DatasetRecordSettings, PolicyInControl
from rlctl.entrypoints.parts import DisplaySettings, RobotConfig, TeleoperatorConfig
from rlctl.entrypoints.settings import AppSettings

# LeRobot's rule: a rollout dataset's name says it is one.
ROLLOUT_PREFIX = "rollout_"


@attrs.frozen(kw_only=True)
class RolloutCommandSettings(AppSettings):
    robot: RobotConfig | None = None
    teleop: TeleoperatorConfig | None = None
    policy: PolicyInControl = attrs.field(factory=PolicyInControl)
    strategy: RolloutStrategyConfig = attrs.field(factory=BaseStrategyConfig)
    inference: InferenceConfig = attrs.field(factory=SyncInferenceConfig)
    # Where a recording strategy stores its episodes (`--dataset.repo_id=user/rollout_name`
    # or `--dataset.root=PATH`); episodic uses its num_episodes, episode_time_s, reset_time_s.
    dataset: DatasetRecordSettings = attrs.field(factory=DatasetRecordSettings)
    fps: int = 30
    # Seconds the rollout lasts; 0: until Esc or Ctrl-C.
    duration: float = 0.0
    # The task text given to the policy and stored; empty: --dataset.single_task.
    task: str = ""
    resume: bool = False
    # At the end the arm goes back to where it started, slowly.
    return_to_initial_position: bool = True
    controls: ControlsMode = "keyboard"
    calibrate: bool = True
    display_data: bool = False
    display: DisplaySettings = attrs.field(factory=DisplaySettings)
    # Where the rollout's report goes (rollout_info.json: timing, who drove, holds);
    # empty: beside the dataset (its root's parent) when recording, else not written.
    report_path: str = ""


@settings_command("rollout")
@config_options(RolloutCommandSettings)
@click.pass_context
def rollout_command(ctx: click.Context, config: RolloutCommandSettings) -> None:
    """Deploy a policy on a robot: act, watch, correct with a teleoperator, record."""
    from rlctl.application.use_cases.record_episodes import DatasetTarget
    from rlctl.application.use_cases.run_rollout import RolloutSettings
    from rlctl.entrypoints.cli.devices import recording_root, require_robot
    from rlctl.entrypoints.container import build_container

    ds = config.dataset
    strategy = config.strategy
    if not config.policy.path and not config.policy.server:
        raise ConfigError(
            "no policy given",
            where="policy.path",
            hint="give --policy.path=DIR|user/repo (a checkpoint) or --policy.server=HOST:PORT",
        )
    target = None
    if strategy.records or ds.root or ds.repo_id:
        _check_repo_name(ds.repo_id)
        root = recording_root(ds.root, ds.repo_id)
        target = DatasetTarget(
            root=root, resume=config.resume, video=ds.video, encoding=ds.video_encoding
        )
    container = build_container(config, owns_process=True)
    robot = container.robot(require_robot(config.robot))
    teleop = (
        container.teleoperator(config.teleop.paired_with(config.robot))
        if config.teleop is not None
        else None
    )
    policy = container.acting_policy(
        config.policy, inference=config.inference, realtime=robot.realtime
    )
    try:
        controls = container.rollout_controls(strategy, config.controls == "keyboard")
    except BaseException:
        _close(policy)
        raise
    keys = getattr(controls, "keys", "")
    if keys:
        click.echo(f"controls: {keys}", err=True)
    use_case = container.run_rollout(
        robot=robot,
        policy=policy,
        teleop=teleop,
        controls=controls,
        upload=_uploader(container, ds) if ds.push_to_hub and ds.repo_id else None,
        calibrate=container.calibrate_robot() if config.calibrate else None,
    )
    report = use_case(
        strategy,
        RolloutSettings(
            fps=config.fps,
            duration_s=config.duration,
            task=config.task or ds.single_task,
            num_episodes=ds.num_episodes,
            episode_time_s=ds.episode_time_s,
            reset_time_s=ds.reset_time_s,
            return_to_initial_position=config.return_to_initial_position,
        ),
        target,
    )
    _echo(report)
    path = _report_path(config.report_path, target.root if target else None)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report.to_info(), indent=2) + "\n", encoding="utf-8")
        click.echo(f"report: {path}")
    if ds.push_to_hub and ds.repo_id and report.total_episodes:
        from rlctl.entrypoints.cli.record import _push

        _push(container, str(report.root), ds)
    if report.interrupted:
        ctx.exit(EXIT_INTERRUPTED)


def _check_repo_name(repo_id: str) -> None:
    owner, _, name = repo_id.rpartition("/")
    if repo_id and not name.startswith(ROLLOUT_PREFIX):
        raise ConfigError(
            f"a rollout dataset's name starts with {ROLLOUT_PREFIX!r}, got {repo_id!r}",
            where="dataset.repo_id",
            hint=f"e.g. --dataset.repo_id={owner or 'user'}/{ROLLOUT_PREFIX}{name} (LeRobot's "
            "rule: deployment data is told apart from demonstrations)",
        )


def _report_path(given: str, root: Path | None) -> Path | None:
    if given:
        return Path(given).expanduser()
    if root is None:
        return None
    return root.parent / f"{root.name}.rollout_info.json"


def _uploader(container: Any, ds: DatasetRecordSettings) -> Any:
    from rlctl.application.use_cases.push_dataset import PushDatasetRequest

    def upload(root: Path) -> None:
        request = PushDatasetRequest(
            root=str(root), repo_id=ds.repo_id, private=ds.private, tags=ds.tags, videos=ds.video
        )
        container.push_dataset()(request)

    return upload


def _close(policy: Any) -> None:
    close = getattr(policy, "close", None)
    if callable(close):
        close()


def _echo(report: Any) -> None:
    if report.root is not None:
        click.echo(
            f"rollout ({report.strategy}): {len(report.saved_episodes)} episode(s), "
            f"{report.frames} frames, into {report.root} ({report.total_episodes} in all)"
        )
    else:
        click.echo(f"rollout ({report.strategy}): nothing recorded")
    click.echo(
        f"ticks: {report.ticks} ({report.policy_ticks} by the policy, {report.human_ticks} by "
        f"a person, {report.held_ticks} held without a fresh action); "
        f"interventions: {len(report.interventions)}; largest policy step "
        f"{report.max_policy_jump:.3g}"
    )
    click.echo(f"loop: {report.timing.describe()}")
