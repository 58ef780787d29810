"""`rlctl dataset push | pull`: share LeRobot v3.0 datasets through the Hugging Face Hub.

Attached to the `dataset` group. Heavy imports (huggingface_hub, pyarrow) happen inside the
command bodies, through the container, so `rlctl dataset --help` stays fast.
"""

from __future__ import annotations

import json
from typing import Any

import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.settings import AppSettings


def split_tags(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple:
    """`--tags a,b --tags c` → ("a", "b", "c")."""
    return tuple(t.strip() for value in values for t in value.split(",") if t.strip())


def echo_result(data: dict[str, Any], as_json: bool, line: str) -> None:
    click.echo(json.dumps(data, indent=2, default=str) if as_json else line)


def echo_pushed(result: Any, as_json: bool, **extra: Any) -> None:
    """What a push reports, for datasets and policies alike."""
    data = {
        "repo_id": result.repo_id,
        "branch": result.branch,
        "commit": result.commit,
        "url": result.url,
        "files": result.files,
        **extra,
    }
    line = f"pushed {result.files} files to {result.url} (commit {result.commit[:8]})"
    echo_result(data, as_json, line)


@settings_command()
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option("--repo-id", required=True, metavar="NAMESPACE/NAME", help="The Hub dataset repo.")
@click.option(
    "--private/--public",
    default=None,
    help="Visibility of a repo created by this push (default: the namespace's default).",
)
@click.option("--branch", default=None, help="Push to this branch (created if missing).")
@click.option(
    "--tags", multiple=True, callback=split_tags, help="Card tags, comma-separated or repeated."
)
@click.option("--license", "license_", default="apache-2.0", show_default=True)
@click.option("--videos/--no-videos", default=True, help="Upload videos/ too (default: yes).")
@click.option(
    "--tag-version/--no-tag-version",
    default=True,
    help="Move the codebase-version tag (v3.0), which LeRobot pulls by default, to this push.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(AppSettings)
def push(
    root: str,
    repo_id: str,
    private: bool | None,
    branch: str | None,
    tags: tuple[str, ...],
    license_: str,
    videos: bool,
    tag_version: bool,
    as_json: bool,
    config: AppSettings,
) -> None:
    """Upload the v3.0 dataset at ROOT to the Hub, with its card and the v3.0 tag."""
    from rlctl.application.use_cases.push_dataset import PushDatasetRequest
    from rlctl.entrypoints.container import build_container

    request = PushDatasetRequest(
        root=root,
        repo_id=repo_id,
        private=private,
        branch=branch,
        tags=tags,
        license=license_,
        videos=videos,
        tag_version=tag_version,
    )
    result = build_container(config).push_dataset()(request)
    echo_pushed(result, as_json, version_tag=result.version_tag)


@settings_command()
@click.argument("repo_id")
@click.option(
    "--revision", default=None, help="Branch, tag or commit (default: the v3.0 tag, else main)."
)
@click.option("--episodes", metavar="SPEC", default=None, help='Only these episodes, e.g. "0-4,7".')
@click.option(
    "--root",
    "local_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Put the files in this folder instead of the cache shared with LeRobot.",
)
@click.option("--videos/--no-videos", default=True, help="Download videos too (default: yes).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(AppSettings)
def pull(
    repo_id: str,
    revision: str | None,
    episodes: str | None,
    local_dir: str | None,
    videos: bool,
    as_json: bool,
    config: AppSettings,
) -> None:
    """Download the dataset REPO_ID (only the files --episodes need), resuming a broken pull.

    Files land in LeRobot's cache (HF_LEROBOT_HOME, default ~/.cache/huggingface/lerobot), so
    LeRobot reuses them and HF_HUB_OFFLINE=1 reads them later without a network. Files already
    there are compared with the Hub's hashes; those that differ are fetched again and listed.
    """
    from rlctl.application.episode_spec import format_episode_spec
    from rlctl.application.use_cases.pull_dataset import PullDatasetRequest
    from rlctl.entrypoints.container import build_container

    request = PullDatasetRequest(
        repo_id=repo_id,
        revision=revision,
        episodes=episodes,
        local_dir=local_dir,
        videos=videos,
    )
    result = build_container(config).pull_dataset()(request)
    chosen = (
        "all episodes"
        if result.episodes is None
        else (f"episodes {format_episode_spec(result.episodes)}")
    )
    echo_result(
        {
            "repo_id": result.repo_id,
            "revision": result.revision,
            "commit": result.commit,
            "root": str(result.root),
            "episodes": None if result.episodes is None else list(result.episodes),
            "files": list(result.files),
            "replaced": list(result.replaced),
        },
        as_json,
        f"{result.repo_id}@{result.revision} ({chosen}): {result.root}"
        + _replaced(result.replaced),
    )


def _replaced(names: tuple[str, ...]) -> str:
    if not names:
        return ""
    shown = "".join(f"\n  {name}" for name in names[:20])
    more = f"\n  … and {len(names) - 20} more" if len(names) > 20 else ""
    return (
        f"\nreplaced {len(names)} file(s) of the local copy that were missing, damaged or not "
        f"the Hub's:{shown}{more}"
    )
