"""`rlctl eval`: run a policy in a simulator and write eval_info.json (LeRobot's layout).

    rlctl eval --env.type=pusht --policy.path=outputs/train/act/checkpoints/last/pretrained_model \\
        --eval.n_episodes=50 --eval.batch_size=0

Without `--policy.path` a policy type that needs no training acts: random by default,
`--policy.type=metaworld_expert` for Meta-World's scripted experts (with `--env.obs_type=state`),
or any other such registered type. The batch size and in-process vs worker
processes are chosen from a short measurement unless `--eval.batch_size` /
`--eval.use_async_envs` force them. Heavy imports happen in the command body only.

A suite's tasks run one after the other; `--env.max_parallel_tasks=N` runs N at once (at most
the cores), each with its own copy of the policy and `cores // N` cores for its env workers.

A policy whose observation keys differ from the env's reads them through a rename map, env key
to policy key, as in lerobot-eval: `--rename_map='{"observation.image":
"observation.images.top"}'`. A policy whose features do not fit the env (trained on another
robot) is refused before the first step, with every difference named.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import attrs
import click

from rlctl.domain.eval_settings import EvalPolicySettings, EvalSettings
from rlctl.domain.run_layout import EVAL_INFO_FILE
from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.parts import DisplaySettings, EnvConfig, PushtEnv
from rlctl.entrypoints.settings import AppSettings

EVAL_INFO_NAME = EVAL_INFO_FILE


@attrs.frozen(kw_only=True)
class EvalCommandSettings(AppSettings):
    env: EnvConfig = attrs.field(factory=PushtEnv)
    eval: EvalSettings = attrs.field(factory=EvalSettings)
    policy: EvalPolicySettings = attrs.field(factory=EvalPolicySettings)
    # Env observation key → the key the policy reads (LeRobot's --rename_map).
    rename_map: dict[str, str] = attrs.field(factory=dict)
    output_dir: str | None = None
    job_name: str | None = None
    # Show the first env of each batch live in rerun: cameras, state, actions (see display.*;
    # without a screen, display.rrd defaults to display.rrd in the output dir).
    display_data: bool = False
    display: DisplaySettings = attrs.field(factory=DisplaySettings)


def default_output_dir(settings: EvalCommandSettings, now: dt.datetime | None = None) -> Path:
    """`outputs/eval/<date>/<time>_<env>_<policy>`, as lerobot-eval names its runs."""
    now = now or dt.datetime.now()
    policy = (
        Path(settings.policy.path).name
        if settings.policy.path
        else "remote"
        if settings.policy.server
        else settings.policy.type
    )
    job = settings.job_name or f"{settings.env.type}_{policy}"
    return Path("outputs/eval") / f"{now:%Y-%m-%d}" / f"{now:%H-%M-%S}_{job}"


@settings_command("eval")
@config_options(EvalCommandSettings)
def eval_command(config: EvalCommandSettings) -> None:
    """Evaluate a policy in simulation; write eval_info.json and videos to the output dir."""
    from rlctl.domain.errors import RlctlError
    from rlctl.entrypoints.container import build_container
    from rlctl.entrypoints.settings import WrittenConfig, write_resolved_config

    out = Path(config.output_dir) if config.output_dir else default_output_dir(config)
    settings = config.eval
    if settings.videos_dir is None and settings.max_episodes_rendered > 0:
        settings = attrs.evolve(settings, videos_dir=str(out / "videos"))
    if config.display_data and config.display.rrd is None:
        display = attrs.evolve(config.display, rrd=str(out / "display.rrd"))
        config = attrs.evolve(config, display=display)
    written = WrittenConfig.before(out)
    write_resolved_config(config, out)
    try:
        # A saved policy's path (folder, run folder or Hub repo id) is resolved once, by the
        # container.
        use_case = build_container(config).evaluation(
            config.env, config.policy, seed=settings.seed, rename_map=config.rename_map
        )
        report = use_case(settings)
    except RlctlError:
        # Refused before anything was evaluated (a policy the env cannot run, a missing
        # checkpoint): the output folder is left as it was.
        written.forget()
        raise
    info = report.to_info()
    (out / EVAL_INFO_NAME).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    overall = info["overall"]
    click.echo(
        f"{overall['n_episodes']} episodes: success {overall['pc_success']:.1f}%, "
        f"avg sum reward {overall['avg_sum_reward']:.3f}, avg max reward "
        f"{overall['avg_max_reward']:.3f}, {overall['eval_s']:.1f} s"
    )
    click.echo(f"wrote {out / EVAL_INFO_NAME}")
