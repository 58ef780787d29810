"""`rlctl policy …`: share checkpoints through the Hugging Face Hub, serve them to robots."""

from __future__ import annotations

import click

from rlctl.entrypoints.cli.lazy_group import LazyGroup

POLICY_SUBCOMMANDS = {
    "push": "rlctl.entrypoints.cli.hub_policy:push",
    "pull": "rlctl.entrypoints.cli.hub_policy:pull",
    "serve": "rlctl.entrypoints.cli.serve_policy:serve",
}


@click.group(cls=LazyGroup, lazy_subcommands=POLICY_SUBCOMMANDS)
def policy() -> None:
    """Push and pull policy checkpoints (LeRobot's pretrained_model layout); serve them."""
