"""A click group whose subcommands are imported only when used (or listed by --help)."""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyGroup(click.Group):
    def __init__(self, *args: Any, lazy_subcommands: dict[str, str] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.lazy_subcommands = dict(lazy_subcommands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_subcommands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_subcommands.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module_name, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command
