"""`--config FILE`, `--print-config` and `--section.key=value` overrides for any command."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from rlctl.domain.config import parse_overrides, unstructure

F = TypeVar("F", bound=Callable[..., Any])

# Unknown `--a.b=c` options reach the command as extra arguments, read as overrides.
OVERRIDE_CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True}
_RAW_ARGS = "rlctl.raw_args"


class SettingsCommand(click.Command):
    """A command whose `--help` lists its settings, generated from its settings class.

    The raw arguments are kept so that `--policy.type=act --help` lists ACT's settings."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_RAW_ARGS] = list(args)
        return super().parse_args(ctx, args)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        cls = getattr(self.callback, "rlctl_config_class", None)
        if cls is not None:
            from rlctl.entrypoints.cli.settings_help import write_settings

            formatter.write_paragraph()
            write_settings(formatter, cls, ctx.meta.get(_RAW_ARGS, []))


def settings_command(name: str | None = None, **kwargs: Any) -> Callable[[F], click.Command]:
    """`@click.command` for a command decorated with `config_options`: overrides accepted,
    settings listed by `--help`."""
    return click.command(name, cls=SettingsCommand, context_settings=OVERRIDE_CONTEXT, **kwargs)


def start_command(ctx: click.Context) -> None:
    """What every command does first: configure logging once, as the root options say."""
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    if obj.get("logging_configured"):
        return
    from rlctl.entrypoints.container import Container

    configure = Container.configure_logging()
    configure(obj.get("log_level", "info"), obj.get("log_format", "console"))
    obj["logging_configured"] = True


def config_options(
    config_cls: type[Any],
    section: str | None = None,
    resolve: Callable[[click.Context, str | None], Any] | None = None,
) -> Callable[[F], F]:
    """Give the command a resolved `config` argument of `config_cls`.

    `resolve(ctx, config_file)` replaces the usual layering for a command whose settings point
    at more settings (a resumed run's saved ones, a pretrained policy's config): it runs before
    the command and before `--print-config` shows the result.
    """

    def decorate(func: F) -> F:
        @click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False),
            default=None,
            help="A YAML or JSON file of settings; dotted overrides (--a.b=c) win over it.",
        )
        @click.option(
            "--print-config", is_flag=True, help="Print the resolved configuration and exit."
        )
        @click.pass_context
        @functools.wraps(func)
        def wrapper(
            ctx: click.Context, *args: Any, config_file: str | None, print_config: bool, **kw: Any
        ) -> Any:
            from rlctl.entrypoints.settings import resolve_config

            start_command(ctx)
            if resolve is not None:
                config = resolve(ctx, config_file)
            else:
                config = resolve_config(
                    config_cls,
                    config_file=config_file,
                    overrides=parse_overrides(ctx.args),
                    section=section,
                )
            if print_config:
                click.echo(json.dumps(unstructure(config), indent=2, default=str))
                ctx.exit(0)
            return ctx.invoke(func, *args, config=config, **kw)

        wrapper.rlctl_config_class = config_cls  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
