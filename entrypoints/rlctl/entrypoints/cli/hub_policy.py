"""`rlctl policy push | pull`: share trained policies through the Hugging Face Hub.

Attached to the `policy` group; imports of huggingface_hub happen in the command bodies.
"""

from __future__ import annotations

import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.cli.hub_dataset import echo_pushed, echo_result, split_tags
from rlctl.entrypoints.settings import AppSettings


@settings_command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option("--repo-id", required=True, metavar="NAMESPACE/NAME", help="The Hub model repo.")
@click.option(
    "--private/--public",
    default=None,
    help="Visibility of a repo created by this push (default: the namespace's default).",
)
@click.option("--branch", default=None, help="Push to this branch (created if missing).")
@click.option(
    "--tags", multiple=True, callback=split_tags, help="Card tags, comma-separated or repeated."
)
@click.option(
    "--license", "license_", default=None, help="Default: config.json's, else apache-2.0."
)
@click.option(
    "--eval-info",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="eval_info.json whose figures go on the card (default: the one beside the weights).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(AppSettings)
def push(
    directory: str,
    repo_id: str,
    private: bool | None,
    branch: str | None,
    tags: tuple[str, ...],
    license_: str | None,
    eval_info: str | None,
    as_json: bool,
    config: AppSettings,
) -> None:
    """Upload the checkpoint in DIRECTORY (a pretrained_model folder) with a model card."""
    from rlctl.application.use_cases.push_policy import PushPolicyRequest
    from rlctl.entrypoints.container import build_container

    request = PushPolicyRequest(
        directory=directory,
        repo_id=repo_id,
        private=private,
        branch=branch,
        tags=tags,
        license=license_,
        eval_info=eval_info,
    )
    result = build_container(config).push_policy()(request)
    echo_pushed(result, as_json)


@settings_command()
@click.argument("repo_id")
@click.option("--revision", default=None, help="Branch, tag or commit (default: main).")
@click.option(
    "--root",
    "local_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Put the files in this folder instead of the Hugging Face cache.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@config_options(AppSettings)
def pull(
    repo_id: str, revision: str | None, local_dir: str | None, as_json: bool, config: AppSettings
) -> None:
    """Download the policy REPO_ID into the cache LeRobot loads from (HF_HUB_CACHE)."""
    from rlctl.application.use_cases.pull_policy import PullPolicyRequest
    from rlctl.entrypoints.container import build_container

    request = PullPolicyRequest(repo_id=repo_id, revision=revision, local_dir=local_dir)
    result = build_container(config).pull_policy()(request)
    echo_result(
        {
            "repo_id": result.repo_id,
            "revision": result.revision,
            "commit": result.commit,
            "root": str(result.root),
        },
        as_json,
        f"{result.repo_id}@{result.revision or 'main'}: {result.root}",
    )
