"""`rlctl dataset check | merge | split | delete-episodes | recompute-stats | convert`.

Attached to the `dataset` group by import path. Everything heavy (pyarrow, av) is imported in
the command bodies, through the container.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.settings import AppSettings

EXIT_PROBLEMS = 1


def _container(config: AppSettings) -> Any:
    from rlctl.entrypoints.container import build_container

    return build_container(config)


FORCE_HELP = (
    "Apply the edit even when ROOT is what the same edit already made of it (a retry after "
    "an interruption is refused without it: episode numbers would name other episodes)."
)


def force_option[F: Callable[..., Any]](function: F) -> F:
    return click.option("--force", is_flag=True, help=FORCE_HELP)(function)


def _echo_edit(result: Any, as_json: bool, verb: str) -> None:
    data = {
        "output": result.output,
        "episodes": result.episodes,
        "frames": result.frames,
        "tasks": result.tasks,
        "kept": list(result.kept),
    }
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(
        f"{verb} {result.output}: {result.episodes} episodes, {result.frames} frames, "
        f"{result.tasks} tasks"
    )
    if result.kept:
        click.echo("kept beside the data, untouched: " + ", ".join(result.kept))


@settings_command()
@click.argument("root", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the problems as JSON.")
@click.option(
    "--fix",
    is_flag=True,
    help="First remove what killed writers left (temporary files, staging and edit folders), "
    "holding the dataset's lock.",
)
@config_options(AppSettings)
def check(root: str, as_json: bool, fix: bool, config: AppSettings) -> None:
    """Read every file and index of the dataset at ROOT and list each problem found.

    Exits 1 when there is any error; warnings (an interrupted commit, files no episode points
    at) are listed but do not fail the check.
    """
    from rlctl.entrypoints.cli.render_check import render_check

    container = _container(config)
    if fix:
        removed = container.dataset_folders().clean_leftovers(root)
        if not as_json:
            click.echo(
                f"removed {len(removed)} leftover(s) of interrupted writers"
                + "".join(f"\n  {path}" for path in removed)
            )
    report = container.check_dataset()(root)
    if as_json:
        click.echo(json.dumps(_report_dict(report), indent=2))
    else:
        click.echo(render_check(report))
    if not report.ok:
        raise SystemExit(EXIT_PROBLEMS)


def _report_dict(report: Any) -> dict[str, Any]:
    return {
        "location": report.location,
        "ok": report.ok,
        "files_checked": report.files_checked,
        "problems": [
            {
                "severity": p.severity,
                "file": p.file,
                "key": p.key,
                "episode": p.episode,
                "message": p.message,
                "hint": p.hint,
            }
            for p in report.problems
        ],
    }


@settings_command()
@click.argument("sources", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="New folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(AppSettings)
def merge(sources: tuple[str, ...], output: str, as_json: bool, config: AppSettings) -> None:
    """Merge the datasets SOURCES (A B …) into a new dataset: A's episodes, then B's, …

    They need the same fps and features; tasks and episodes are renumbered, videos are joined
    without re-encoding, and the statistics are merged.
    """
    result = _container(config).merge_datasets()(list(sources), output)
    _echo_edit(result, as_json, "merged into")


@settings_command()
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option("--episodes", metavar="SPEC", default=None, help='Episodes to copy, e.g. "0-4,7".')
@click.option(
    "--fractions",
    metavar="NAME=F,…",
    default=None,
    help='Split all episodes in order, e.g. "train=0.8,val=0.2": OUT/train and OUT/val.',
)
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="New folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(AppSettings)
def split(
    root: str,
    episodes: str | None,
    fractions: str | None,
    output: str,
    as_json: bool,
    config: AppSettings,
) -> None:
    """Copy some episodes of ROOT into a new dataset (ROOT is not changed)."""
    from rlctl.application.use_cases.split_dataset import parse_fractions

    results = _container(config).split_dataset()(
        root,
        output,
        episodes=episodes,
        fractions=parse_fractions(fractions) if fractions is not None else None,
    )
    for result in results:
        _echo_edit(result, as_json, "wrote")


@settings_command("delete-episodes")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option("--episodes", metavar="SPEC", required=True, help='Episodes to delete, e.g. "3,5-7".')
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the result here; without it ROOT is replaced once the new copy is complete.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@force_option
@config_options(AppSettings)
def delete_episodes(
    root: str, episodes: str, output: str | None, as_json: bool, force: bool, config: AppSettings
) -> None:
    """Delete episodes of ROOT; the others are renumbered from 0.

    In place, what ROOT holds besides the dataset (README.md, notes, other folders) is kept.
    """
    result = _container(config).delete_episodes()(root, episodes, output, force=force)
    _echo_edit(result, as_json, "rewrote")


@settings_command("recompute-stats")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--relative-actions",
    is_flag=True,
    help="Store the statistics of action - state (over action chunks) as stats.json's "
    "'action', as pi0/pi05 trained with relative actions expect (LeRobot's convention).",
)
@click.option(
    "--exclude-joints",
    multiple=True,
    default=("gripper",),
    show_default=True,
    help="Joints kept absolute with --relative-actions (substring of the action names).",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="The policy's action chunk size, for --relative-actions.",
)
@click.option(
    "--skip-visual", is_flag=True, help="Keep the cameras' statistics (no video decoding)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(AppSettings)
def recompute_stats(
    root: str,
    relative_actions: bool,
    exclude_joints: tuple[str, ...],
    chunk_size: int,
    skip_visual: bool,
    as_json: bool,
    config: AppSettings,
) -> None:
    """Compute every feature's statistics of ROOT again: meta/episodes and meta/stats.json."""
    from rlctl.application.use_cases.recompute_stats import RecomputeRequest

    joints = tuple(j.strip() for value in exclude_joints for j in value.split(",") if j.strip())
    request = RecomputeRequest(
        location=root,
        relative_actions=relative_actions,
        exclude_joints=joints,
        chunk_size=chunk_size,
        visual=not skip_visual,
    )
    result = _container(config).recompute_stats()(request)
    data = {
        "location": result.location,
        "episodes": result.episodes,
        "features": list(result.features),
        "relative_action_chunks": result.relative_chunks,
    }
    line = f"statistics of {len(result.features)} features over {result.episodes} episodes"
    if result.relative_chunks is not None:
        line += f"; stats.json 'action' is relative ({result.relative_chunks} chunks)"
    click.echo(json.dumps(data, indent=2) if as_json else line)


@settings_command()
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the v3.0 dataset here; without it ROOT is converted and the original kept "
    "beside it (ROOT.v2.1).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(AppSettings)
def convert(root: str, output: str | None, as_json: bool, config: AppSettings) -> None:
    """Convert the LeRobot v2.1 (or v2.0) dataset at ROOT to v3.0."""
    converted = _container(config).convert_dataset()(root, output)
    _echo_edit(converted.result, as_json, f"converted {converted.from_version} ->")
    if converted.original and not as_json:
        click.echo(f"the original is kept at {converted.original}")
