"""`rlctl quickstart`: the whole loop in one command, with no robot and no network.

It records scripted-expert demonstrations in a Meta-World task (state only, no rendering),
trains a small policy on the CPU and evaluates it in the same task — by running the real
`rlctl record`, `rlctl train` and `rlctl eval` commands with these arguments, so nothing here is
a special path. Each step's arguments are printed, so a user can rerun or vary any one of them.

Running it again never touches an earlier run: when the output folder already holds something,
the run goes to the first free `<output_dir>-2`, `-3` … and says so.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import click

from rlctl.domain.run_layout import EVAL_INFO_FILE, last_pretrained_model

DEFAULT_TASK = "drawer-open-v3"


def fresh_output_dir(requested: Path) -> Path:
    """`requested` when it is new or empty, else the first `<requested>-N` (N = 2, 3 …) that is
    free: each run gets a folder of its own, and no earlier run is touched."""
    if not requested.exists() or (requested.is_dir() and not any(requested.iterdir())):
        return requested
    n = 2
    while (candidate := requested.with_name(f"{requested.name}-{n}")).exists():
        n += 1
    return candidate


def record_args(task: str, root: Path, episodes: int) -> list[str]:
    return [
        "--robot.type=sim",
        "--robot.env.type=metaworld",
        f"--robot.env.task={task}",
        "--robot.env.obs_type=state",
        "--teleop.type=metaworld_expert",
        f"--teleop.task={task}",
        f"--dataset.root={root}",
        f"--dataset.num_episodes={episodes}",
        "--dataset.fps=80",
        "--dataset.reset_time_s=0",
        "--controls=off",
    ]


def train_args(root: Path, out: Path, policy: str, steps: int, batch_size: int) -> list[str]:
    return [
        f"--dataset.root={root}",
        f"--policy.type={policy}",
        f"--steps={steps}",
        f"--batch_size={batch_size}",
        "--num_workers=0",
        f"--save_freq={steps}",
        f"--output_dir={out}",
    ]


def eval_args(checkpoint: Path, task: str, out: Path, episodes: int, rendered: int) -> list[str]:
    return [
        f"--policy.path={checkpoint}",
        "--env.type=metaworld",
        f"--env.task={task}",
        "--env.obs_type=state",
        f"--eval.n_episodes={episodes}",
        f"--eval.max_episodes_rendered={rendered}",
        f"--output_dir={out}",
    ]


@click.command(name="quickstart")
@click.option("--task", default=DEFAULT_TASK, show_default=True, help="Any Meta-World task.")
@click.option("--episodes", default=10, show_default=True, help="Demonstrations to record.")
@click.option("--steps", default=2000, show_default=True, help="Training steps.")
@click.option("--batch_size", "--batch-size", "batch_size", default=64, show_default=True)
@click.option("--policy", "policy_type", default="mlp", show_default=True, help="Policy type.")
@click.option(
    "--eval_episodes",
    "--eval-episodes",
    "eval_episodes",
    default=10,
    show_default=True,
    help="Evaluation episodes.",
)
@click.option(
    "--videos",
    default=0,
    show_default=True,
    help="Evaluation episodes to film (needs MuJoCo rendering: MUJOCO_GL=egl).",
)
@click.option(
    "--output_dir",
    "--output-dir",
    "output_dir",
    type=click.Path(file_okay=False),
    default="outputs/quickstart",
    show_default=True,
)
@click.pass_context
def quickstart_command(
    ctx: click.Context,
    task: str,
    episodes: int,
    steps: int,
    batch_size: int,
    policy_type: str,
    eval_episodes: int,
    videos: int,
    output_dir: str,
) -> None:
    """Record expert demonstrations in Meta-World, train a policy, evaluate it: one command."""
    from rlctl.entrypoints.cli.eval import eval_command
    from rlctl.entrypoints.cli.record import record_command
    from rlctl.entrypoints.cli.train import train_command

    requested = Path(output_dir)
    out = fresh_output_dir(requested)
    if out != requested:
        click.secho(
            f"{requested} already holds an earlier run (kept as it is); this run goes to {out}",
            fg="yellow",
            err=True,
        )
    slug = task.replace("/", "_")
    root = out / "data" / slug
    run = out / "train" / f"{slug}_{policy_type}"
    checkpoint = last_pretrained_model(run)
    evaluation = out / "eval" / slug
    steps_to_run = [
        ("record", record_command, record_args(task, root, episodes)),
        ("train", train_command, train_args(root, run, policy_type, steps, batch_size)),
        ("eval", eval_command, eval_args(checkpoint, task, evaluation, eval_episodes, videos)),
    ]
    started = time.perf_counter()
    for name, command, args in steps_to_run:
        click.secho(f"\n$ rlctl {name} {shlex.join(args)}", bold=True, err=True)
        command.main(args=args, prog_name=f"rlctl {name}", standalone_mode=False, obj=ctx.obj)

    info = json.loads((evaluation / EVAL_INFO_FILE).read_text(encoding="utf-8"))
    overall = info["overall"]
    click.echo("")
    click.echo(f"success rate  {overall['pc_success']:.1f}% over {overall['n_episodes']} episodes")
    click.echo(f"dataset       {root}")
    click.echo(f"checkpoint    {checkpoint}")
    click.echo(f"metrics       {run / 'metrics.jsonl'}")
    click.echo(f"evaluation    {evaluation / 'eval_info.json'}")
    if overall.get("video_paths"):
        click.echo(f"videos        {', '.join(overall['video_paths'])}")
    click.echo(f"total time    {time.perf_counter() - started:.0f} s")
