"""`rlctl train`: train a policy on a LeRobot dataset, with LeRobot's options and run layout.

    rlctl train --dataset.root=data/pusht --policy.type=act --steps=100000 --batch_size=8 \\
        --output_dir=outputs/train/act_pusht [--env.type=pusht --eval_freq=20000]
    rlctl train --resume=outputs/train/act_pusht          # after a crash, Ctrl-C or kill
    rlctl train --policy.path=DIR_OR_REPO --policy.train_expert_only=true --dataset.root=...
    torchrun --nproc_per_node=2 --no-python rlctl train ...   # DDP, one process per GPU/CPU

The output dir gets `rlctl_config.json` (the resolved settings), `metrics.jsonl` and
`checkpoints/<step>/{pretrained_model,training_state}` with a `last` link (a run refused before
it writes anything else takes its `rlctl_config.json` back). Resuming reads the
run's `rlctl_config.json` and applies the command line's overrides on top (e.g. `--steps`).
Fine-tuning (`--policy.path`, as LeRobot spells it, or `--policy.pretrained_path`) starts from
the checkpoint's policy config and weights; `--policy.<field>` may be any field of its type.
Heavy imports happen in the command body only.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Literal

import attrs
import click

from rlctl.domain.errors import RlctlError
from rlctl.domain.train_settings import DatasetSource, TrainSettings
from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.cli.errors import EXIT_INTERRUPTED
from rlctl.entrypoints.cli.train_config import resolve_train_settings
from rlctl.entrypoints.parts import EnvConfig


@attrs.frozen(kw_only=True)
class TrainDatasetSettings(DatasetSource):
    video_backend: Literal["auto", "pyav", "torchcodec"] = "auto"


@attrs.frozen(kw_only=True)
class WandbSettings:
    enable: bool = False
    project: str = "rlctl"
    # offline: logs stay in the output dir until `wandb sync`.
    mode: Literal["offline", "online", "disabled"] = "offline"


@attrs.frozen(kw_only=True)
class TrainCommandSettings(TrainSettings):
    dataset: TrainDatasetSettings = attrs.field(factory=TrainDatasetSettings)
    # A simulator to evaluate in every `eval_freq` steps; none: no evaluation.
    env: EnvConfig | None = None
    tensorboard: bool = False
    # Rewrite the run's report (report.html, report_curves.png) at most every this many seconds
    # while training, and once at the end; 0: no report is written (`rlctl report` makes one).
    report_refresh_s: float = 0.0
    wandb: WandbSettings = attrs.field(factory=WandbSettings)
    progress: Literal["auto", "terminal", "silent"] = "auto"


for _cls in (TrainDatasetSettings, WandbSettings, TrainCommandSettings):
    attrs.resolve_types(_cls)


def default_output_dir(settings: TrainSettings, now: dt.datetime | None = None) -> Path:
    """`outputs/train/<date>/<time>_<job>`, as lerobot-train names its runs."""
    now = now or dt.datetime.now()
    return Path("outputs/train") / f"{now:%Y-%m-%d}" / f"{now:%H-%M-%S}_{job_name(settings)}"


def job_name(settings: TrainCommandSettings | TrainSettings) -> str:
    env = getattr(settings, "env", None)
    policy = settings.policy.type_name
    return settings.job_name or (f"{env.type}_{policy}" if env is not None else policy)


def is_main_process() -> bool:
    return os.environ.get("RANK", "0") == "0"


def trainable_policy_types() -> str:
    """The policy types that learn (built-in and plugins), as `a|b|c`, named without importing
    their configs (start-up): a type not imported yet is listed, and training one that does not
    learn is refused with a message."""
    from rlctl.domain.config import registered_types
    from rlctl.domain.policies import PolicyConfig
    from rlctl.domain.policies.registry import POLICY_TYPES

    imported: dict[str, type[PolicyConfig]] = registered_types(PolicyConfig)
    names = POLICY_TYPES.names()
    return "|".join(n for n in names if n not in imported or imported[n].trainable)


EPILOG = """\b
Common settings (all: --print-config):
  --dataset.root=PATH | --dataset.repo_id=ID   [--dataset.episodes=[0,1]]
  --dataset.repo_id=[A,B] --dataset.weights=[3,1]   a mixture, drawn 3:1
  --dataset.image_transforms.enable=true       LeRobot's augmentations
  --policy.type=TYPE  --policy.<field>=VALUE  (e.g. --policy.chunk_size=50)
                 TYPE: {types}
  --policy.path=DIR|REPO_ID   fine-tune: its config and weights, --policy.<field> on top
                 (also --policy.pretrained_path; --policy.type, if given, must be its type)
  --policy.use_relative_actions=true [--policy.relative_exclude_joints='["gripper"]']
  --steps=N --batch_size=B --num_workers=W --seed=S --output_dir=DIR
  --log_freq=N --save_freq=N --eval_freq=N --env.type=pusht --eval.n_episodes=N
  --optimizer.lr=X --optimizer.type=adamw --scheduler.type=none --grad_clip_norm=X
  --use_amp=true (CUDA) --ema.enable=true --tensorboard=true --wandb.enable=true
  --cpu_kernels=torch  torch's own kernels (default auto: rlctl's CPU training speed paths)
  --resume=DIR      continue a run (its settings, then these overrides)
"""


def train_settings(ctx: click.Context, config_file: str | None) -> TrainCommandSettings:
    """The run's settings: a fine-tuned checkpoint's policy config or a resumed run's saved
    settings under the file, the environment and the command line (see `train_config`)."""
    return resolve_train_settings(TrainCommandSettings, ctx.args, config_file)


@settings_command("train", epilog=EPILOG.replace("{types}", trainable_policy_types()))
@config_options(TrainCommandSettings, resolve=train_settings)
@click.pass_context
def train_command(ctx: click.Context, config: TrainCommandSettings) -> None:
    """Train a policy on a LeRobot dataset (--dataset.root=PATH or --dataset.repo_id=ID);
    --policy.type names it (see below), --resume=DIR continues a run."""
    from rlctl.domain.config import unstructure
    from rlctl.entrypoints.container import build_container
    from rlctl.entrypoints.settings import WrittenConfig, write_resolved_config

    if config.output_dir is None:
        config = attrs.evolve(config, output_dir=str(default_output_dir(config)))
    config = attrs.evolve(config, job_name=job_name(config))
    out = Path(config.output_dir or ".")
    # The command owns its process: the allocator may keep freed memory (`allocator`).
    container = build_container(config, owns_process=True)  # type: ignore[arg-type]
    main = is_main_process()
    # A new run aimed at an existing run's folder is refused by the use case; its settings
    # must not overwrite that run's before it is.
    written: WrittenConfig | None = None
    if main and (config.resume or container.training_backend().find_checkpoint(str(out)) is None):
        written = WrittenConfig.before(out)
        write_resolved_config(config, out)
    metrics = container.training_metrics(
        out,
        tensorboard=config.tensorboard and main,
        wandb=config.wandb.enable and main,
        wandb_project=config.wandb.project,
        wandb_mode=config.wandb.mode,
        config=unstructure(config),
    )
    if config.report_refresh_s > 0 and main:
        metrics = container.refreshing_report(metrics, str(out), every_s=config.report_refresh_s)
    evaluator = (
        container.training_evaluator(container.simulation(config.env))
        if config.env is not None and config.eval_freq > 0
        else None
    )
    use_case = container.train_policy(metrics=metrics, evaluator=evaluator)
    try:
        report = use_case(config)
    except RlctlError:
        # A run refused before it wrote anything but its settings leaves nothing behind.
        if written is not None:
            written.forget()
        raise
    if not main:
        return
    checkpoint = report.last_checkpoint.location if report.last_checkpoint else "none"
    click.echo(
        f"trained steps {report.start_step}..{report.steps_done} of {config.steps}; "
        f"last checkpoint: {checkpoint}"
    )
    if config.report_refresh_s > 0:
        click.echo(f"report: {out / 'report.html'}")
    else:
        click.echo(f"report (curves, config): rlctl report {out}")
    if report.interrupted:
        if report.last_checkpoint is not None:
            click.echo(f"interrupted; continue with: rlctl train --resume={out}", err=True)
        else:
            click.echo("interrupted before any checkpoint was saved; nothing to resume", err=True)
        ctx.exit(EXIT_INTERRUPTED)
