"""`rlctl`: the root group. Keep this module light: `rlctl --help` must not import torch."""

from __future__ import annotations

import os
from typing import Any

import click

from rlctl.entrypoints.cli.errors import EXIT_INTERRUPTED, report
from rlctl.entrypoints.cli.lazy_group import LazyGroup

SUBCOMMANDS = {
    "dataset": "rlctl.entrypoints.cli.dataset:dataset",
    "eval": "rlctl.entrypoints.cli.eval:eval_command",
    "policy": "rlctl.entrypoints.cli.policy:policy",
    "quickstart": "rlctl.entrypoints.cli.quickstart:quickstart_command",
    "train": "rlctl.entrypoints.cli.train:train_command",
    "train-tokenizer": "rlctl.entrypoints.cli.train_tokenizer:train_tokenizer_command",
    "calibrate": "rlctl.entrypoints.cli.calibrate:calibrate_command",
    "find-cameras": "rlctl.entrypoints.cli.find_cameras:find_cameras_command",
    "find-port": "rlctl.entrypoints.cli.find_port:find_port_command",
    "lekiwi-host": "rlctl.entrypoints.cli.lekiwi_host:lekiwi_host_command",
    "record": "rlctl.entrypoints.cli.record:record_command",
    "replay": "rlctl.entrypoints.cli.replay:replay_command",
    "report": "rlctl.entrypoints.cli.report:report_command",
    "rl": "rlctl.entrypoints.cli.rl:rl",
    "rollout": "rlctl.entrypoints.cli.rollout:rollout_command",
    "setup-can": "rlctl.entrypoints.cli.setup_can:setup_can_command",
    "setup-motors": "rlctl.entrypoints.cli.setup_motors:setup_motors_command",
    "teleoperate": "rlctl.entrypoints.cli.teleoperate:teleoperate_command",
}

# One line per command for `rlctl --help`, so listing commands imports none of them.
SUBCOMMAND_HELP = {
    "calibrate": "Calibrate a robot or teleoperator arm: homing, then ranges of motion.",
    "dataset": "Inspect and maintain LeRobot v3.0 datasets.",
    "eval": "Evaluate a policy in simulation; write eval_info.json and videos...",
    "find-cameras": "List cameras with the size, rate and format they start in.",
    "find-port": "List serial ports, ask to unplug the board, and name the port that went away.",
    "lekiwi-host": "Serve a LeKiwi to a client over ZeroMQ (run it on the robot).",
    "policy": "Push and pull policy checkpoints (LeRobot's pretrained_model layout); serve...",
    "quickstart": "Record expert demonstrations in Meta-World, train a policy, evaluate it...",
    "record": "Record episodes from a robot driven by a teleoperator (or a policy)...",
    "replay": "Replay the actions of one recorded episode on a robot, at the dataset's rate.",
    "report": "Write the report of a training run, an evaluation or a rollout (its...",
    "rl": "Reinforcement learning on the robot (HIL-SERL): a SAC learner and its actors.",
    "rollout": "Deploy a policy on a robot: act, watch, correct with a teleoperator, record.",
    "setup-can": "Set up CAN interfaces for Damiao motors, find the motors on them, time their...",
    "setup-motors": "Set the id and baud rate of each motor of an arm, one motor at a time.",
    "teleoperate": "Drive a robot from a teleoperator at a fixed rate.",
    "train": "Train a policy on a LeRobot dataset (--dataset.root=PATH or --dataset.repo_id=ID)...",
    "train-tokenizer": "Fit a FAST action tokenizer (π0-FAST's) on a dataset's action chunks.",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rlctl")
    except PackageNotFoundError:
        return "0+unknown"


class RlctlGroup(LazyGroup):
    """Turns every error below it into one message and a hint, unless --debug is on."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as error:
            if _debug_on(ctx):
                raise
            raise report(error) from error


def _debug_on(ctx: click.Context) -> bool:
    obj = ctx.find_root().obj
    if isinstance(obj, dict) and obj.get("debug"):
        return True
    return _switched_on(os.environ.get("RLCTL_DEBUG", ""))


def _switched_on(value: str) -> bool:
    """An on/off environment variable: unset or empty is off, a yes/no word means what it says,
    anything else set is on (RLCTL_DEBUG=no is off; it was on)."""
    from rlctl.domain.errors import ConfigError
    from rlctl.domain.yes_no import parse_bool

    if not value.strip():
        return False
    try:
        return parse_bool(value)
    except ConfigError:
        return True


@click.group(
    cls=RlctlGroup,
    lazy_subcommands=SUBCOMMANDS,
    lazy_help=SUBCOMMAND_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(version=_version(), prog_name="rlctl", message="%(prog)s %(version)s")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    envvar="RLCTL_LOG_LEVEL",
    help="Least severe log records shown.",
)
@click.option(
    "--log-format",
    type=click.Choice(["console", "json"]),
    default="console",
    show_default=True,
    envvar="RLCTL_LOG_FORMAT",
    help="key=value lines for people, JSON lines for machines.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, log_level: str, log_format: str, debug: bool) -> None:
    """rlctl: record demonstrations, train imitation policies and evaluate them in simulation,
    on LeRobot v3.0 datasets and checkpoints."""
    # Logging is configured when a command body starts (see `start_command`), so that
    # `rlctl <cmd> --help` does not pay for importing structlog.
    ctx.obj = {"debug": debug, "log_level": log_level, "log_format": log_format}


def main() -> None:
    cli(prog_name="rlctl")
