"""`rlctl dataset …`: look at and maintain LeRobot v3.0 datasets."""

from __future__ import annotations

import json

import click

from rlctl.entrypoints.cli.config_options import OVERRIDE_CONTEXT, SettingsCommand, config_options
from rlctl.entrypoints.cli.lazy_group import LazyGroup
from rlctl.entrypoints.settings import AppSettings

DATASET_SUBCOMMANDS = {
    "push": "rlctl.entrypoints.cli.hub_dataset:push",
    "pull": "rlctl.entrypoints.cli.hub_dataset:pull",
    "check": "rlctl.entrypoints.cli.dataset_tools:check",
    "merge": "rlctl.entrypoints.cli.dataset_tools:merge",
    "split": "rlctl.entrypoints.cli.dataset_tools:split",
    "delete-episodes": "rlctl.entrypoints.cli.dataset_tools:delete_episodes",
    "recompute-stats": "rlctl.entrypoints.cli.dataset_tools:recompute_stats",
    "convert": "rlctl.entrypoints.cli.dataset_tools:convert",
    "remove-feature": "rlctl.entrypoints.cli.dataset_edits:remove_feature",
    "add-feature": "rlctl.entrypoints.cli.dataset_edits:add_feature",
    "modify-tasks": "rlctl.entrypoints.cli.dataset_edits:modify_tasks",
    "convert-images-to-video": "rlctl.entrypoints.cli.dataset_edits:convert_images_to_video",
    "reencode-videos": "rlctl.entrypoints.cli.dataset_edits:reencode_videos",
    "crop-roi": "rlctl.entrypoints.cli.dataset_edits:crop_roi",
    "view": "rlctl.entrypoints.cli.dataset_view:view",
}


@click.group(cls=LazyGroup, lazy_subcommands=DATASET_SUBCOMMANDS)
def dataset() -> None:
    """Inspect and maintain LeRobot v3.0 datasets."""


@dataset.command(cls=SettingsCommand, context_settings=OVERRIDE_CONTEXT)
@click.argument("root", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@config_options(AppSettings)
def info(root: str, as_json: bool, config: AppSettings) -> None:
    """Summarise the dataset at ROOT: fps, features, episodes, frames, tasks, robot, size."""
    from rlctl.entrypoints.cli.render import render_summary
    from rlctl.entrypoints.container import build_container

    summary = build_container(config).inspect_dataset()(root)
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        click.echo(render_summary(summary))
