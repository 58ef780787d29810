"""`rlctl rl …`: reinforcement learning on the robot (HIL-SERL), a learner and its actors.

    rlctl rl learn --output_dir=outputs/rl/pendulum --port=50051 \\
        --policy.type=gaussian_actor --policy.latent_dim=64
    rlctl rl act --learner=127.0.0.1:50051 \\
        --robot.type=sim --robot.env.type=gym --robot.env.id=Pendulum-v1 --steps=20000

The learner trains a soft actor-critic (SAC) on what the actors stream (and on demonstrations,
`--demonstrations=DATASET_FOLDER`); the actors run its newest policy on a robot, every action
through the robot's safety guard. Transitions and parameters travel over the policy server's gRPC
transport (token, no pickle, size limits). See docs/guides/rl.md.
"""

from __future__ import annotations

import attrs
import click

from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.rl.sac import SACSettings
from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.cli.lazy_group import LazyGroup
from rlctl.entrypoints.cli.server_settings import check_message_timeout
from rlctl.entrypoints.parts import RobotConfig
from rlctl.entrypoints.settings import AppSettings

RL_SUBCOMMANDS = {
    "learn": "rlctl.entrypoints.cli.rl:learn",
    "act": "rlctl.entrypoints.cli.rl:act",
}


@click.group(cls=LazyGroup, lazy_subcommands=RL_SUBCOMMANDS)
def rl() -> None:
    """Reinforcement learning on the robot (HIL-SERL): a SAC learner and its actors."""


@attrs.frozen(kw_only=True)
class LearnCommandSettings(AppSettings):
    # The policy trained: a gaussian_actor (its features come from the first actor, or from
    # the demonstrations).
    policy: PolicyConfig = attrs.field(factory=GaussianActorConfig)
    # Start from this checkpoint's policy (a pretrained_model folder) instead.
    policy_path: str | None = None
    # SAC's settings (LeRobot's SACAlgorithmConfig): learning rates, discount, critics …
    algorithm: SACSettings = attrs.field(factory=SACSettings)
    output_dir: str = "outputs/rl"
    # Go on with the run in output_dir: its last checkpoint and its replay.
    resume: bool = False
    # A LeRobot dataset folder of demonstrations (with next.reward), mixed into every batch.
    demonstrations: str | None = None
    batch_size: int = 256
    # The share of each batch drawn from the actors' transitions (the rest: demonstrations and
    # interventions).
    online_ratio: float = 0.5
    # Optimisation steps (None: the policy's online_steps).
    steps: int | None = None
    max_seconds: float | None = None
    save_freq: int = 2000
    # Seconds between parameter pushes (None: the policy's actor_learner_config's).
    push_every_s: float | None = None
    seed: int = 0
    # DrQ: shift the images by up to 4 pixels when sampled.
    drq: bool = True
    device: str | None = None
    host: str = "127.0.0.1"
    port: int = 50051
    token_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    max_message_mb: float = 64.0
    workers: int = 8
    # A call whose message has not arrived this many seconds after it was admitted is cut off,
    # so an actor stalled mid-send (its network gone, its process frozen) frees its worker and
    # its host's slots; keep it above the actors' own 10 s deadline.
    message_timeout_s: float = 30.0


@settings_command("learn")
@config_options(LearnCommandSettings)
@click.option(
    "--insecure",
    is_flag=True,
    help="Listen beyond this machine without TLS: the token and the transitions cross the "
    "network in clear. Only on a network you trust.",
)
def learn(config: LearnCommandSettings, insecure: bool) -> None:
    """Train a SAC policy from the actors' transitions (and demonstrations); serve its weights."""
    from pathlib import Path

    from rlctl.application.use_cases.rl_learn import LearnSettings
    from rlctl.entrypoints.container import build_container

    policy = config.policy
    if not isinstance(policy, GaussianActorConfig):
        raise ConfigError(
            f"rlctl rl learn trains a gaussian_actor policy, not {policy.type_name!r}",
            where="--policy.type",
            hint="--policy.type=gaussian_actor (SAC's actor)",
        )
    _check_message_mb(config.max_message_mb)
    check_message_timeout(config.message_timeout_s)
    use_case = build_container(config).rl_learning(config, insecure=insecure)
    settings = LearnSettings(
        output_dir=Path(config.output_dir),
        batch_size=config.batch_size,
        online_ratio=config.online_ratio,
        online_buffer_capacity=policy.online_buffer_capacity,
        offline_buffer_capacity=policy.offline_buffer_capacity,
        online_step_before_learning=policy.online_step_before_learning,
        push_every_s=(
            config.push_every_s
            if config.push_every_s is not None
            else float(policy.actor_learner_config.policy_parameters_push_frequency)
        ),
        save_freq=config.save_freq,
        steps=config.steps if config.steps is not None else policy.online_steps,
        max_seconds=config.max_seconds,
        resume=config.resume,
        seed=config.seed,
        drq=config.drq,
    )

    def ready(address: str) -> None:
        click.echo(f"learner listening on {address}", err=False)

    result = use_case(settings, on_ready=ready)
    click.echo(
        f"learned: {result.optimization_step} steps, {result.online_transitions} online "
        f"transitions, {result.episodes} episodes"
        + (f", {result.offline_transitions} offline transitions" if config.demonstrations else "")
        + (f"; checkpoint {result.checkpoint}" if result.checkpoint else "")
    )


def _check_message_mb(value: float) -> None:
    """gRPC's messages are at most 2 GiB: a limit within (0, 2047] MiB (NaN refused too)."""
    if not (isinstance(value, int | float) and 0 < value <= 2047):
        raise ConfigError(
            f"max_message_mb must be within (0, 2047], got {value!r}",
            where="--max_message_mb",
            hint="e.g. --max_message_mb=64 (the learner's and its actors' alike)",
        )


@attrs.frozen(kw_only=True)
class RewardSettings:
    # A reward classifier's folder (rlctl train --policy.type=reward_classifier): success from
    # the cameras replaces the env's reward. None: the env's reward.
    classifier_path: str | None = None
    # The probability from which the classifier's answer counts as a success.
    threshold: float = 0.5
    # The reward of a success (0 otherwise); the episode ends there.
    success_reward: float = 1.0


@attrs.frozen(kw_only=True)
class ActCommandSettings(AppSettings):
    # The robot acted on; a simulator: --robot.type=sim --robot.env.type=gym --robot.env.id=…
    robot: RobotConfig | None = None
    # The learner's address (`rlctl rl learn` prints it).
    learner: str = "127.0.0.1:50051"
    token_file: str | None = None
    tls_cert: str | None = None
    max_message_mb: float = 64.0
    # Interaction steps, or episodes, in all (one of them).
    steps: int | None = None
    episodes: int | None = None
    # Push mid-episode every this many ticks (0: at each episode's end).
    push_every: int = 0
    # The control rate (None: as fast as the robot steps; a real arm paces itself).
    fps: float | None = None
    # Give up after the learner has been away this long (the arm holds meanwhile).
    reconnect_timeout_s: float = 300.0
    # The longest wait between two sends while the learner answers busy (its queue full: more
    # actors than it keeps up with); the wait doubles from 0.5 s up to this.
    max_backoff_s: float = 8.0
    device: str | None = None
    reward: RewardSettings = attrs.field(factory=RewardSettings)


@settings_command("act")
@config_options(ActCommandSettings)
def act(config: ActCommandSettings) -> None:
    """Run the learner's policy on a robot and stream the transitions to it."""
    from rlctl.application.use_cases.rl_act import ActSettings, check_act_settings
    from rlctl.entrypoints.cli.devices import require_robot
    from rlctl.entrypoints.container import build_container

    settings = ActSettings(
        steps=config.steps,
        episodes=config.episodes,
        push_every=config.push_every,
        fps=config.fps,
        reconnect_timeout_s=config.reconnect_timeout_s,
        max_backoff_s=config.max_backoff_s,
    )
    # Every value checked before the robot is built or connected, or the learner called.
    check_act_settings(settings)
    _check_message_mb(config.max_message_mb)
    container = build_container(config, owns_process=True)
    robot = container.robot(require_robot(config.robot))
    use_case = container.rl_acting(config, robot)
    result = use_case(settings)
    mean = sum(result.returns) / len(result.returns) if result.returns else 0.0
    click.echo(
        f"acted: {result.steps} steps, {result.episodes} episodes, mean return {mean:.3f}, "
        f"{result.interventions} interventions, parameters v{result.parameters_version}"
    )
