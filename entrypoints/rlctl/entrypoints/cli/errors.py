"""How errors reach a person: one line saying what and where, one saying what to do."""

from __future__ import annotations

import sys
import traceback
from typing import IO, Any

import click

from rlctl.domain.errors import RlctlError

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


class ReportedError(click.ClickException):
    """An RlctlError (or an unexpected one) shown without a traceback; exit status 1."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def show(self, file: IO[Any] | None = None) -> None:
        err = file or sys.stderr
        click.echo(click.style("error: ", fg="red", bold=True) + self.message, file=err)
        if self.hint:
            click.echo(click.style("hint: ", fg="yellow", bold=True) + self.hint, file=err)


def report(error: BaseException) -> ReportedError:
    if isinstance(error, RlctlError):
        return ReportedError(error.summary(), error.hint)
    detail = "".join(traceback.format_exception_only(type(error), error)).strip()
    return ReportedError(
        f"unexpected {detail}",
        "run again with --debug to see the traceback, and report it if the input was valid",
    )
