"""structlog, configured once: key=value on a terminal, JSON lines on request."""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

LogFormat = Literal["console", "json"]
LEVELS = ("debug", "info", "warning", "error", "critical")


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler on whatever `sys.stderr` is when a record is written, not the one it
    was made with: a command run inside another program (a test runner, a service swapping its
    streams) must not leave the root logger writing to a stream that was closed since."""

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def _print_to_current_stderr(*_args: object) -> structlog.PrintLogger:
    return structlog.PrintLogger(sys.stderr)


def configure_logging(
    level: str = "info", fmt: LogFormat = "console", stream: TextIO | None = None
) -> None:
    """Route structlog and the stdlib `logging` records through one renderer on stderr (the
    current `sys.stderr` at each record unless a stream is given)."""
    level_no = logging.getLevelNamesMapping()[level.upper()]
    out = stream or sys.stderr
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        renderer: structlog.typing.Processor = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.format_exc_info)
    else:
        colors = bool(getattr(out, "isatty", lambda: False)())
        renderer = structlog.dev.ConsoleRenderer(colors=colors)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level_no),
        logger_factory=(
            structlog.PrintLoggerFactory(file=stream) if stream else _print_to_current_stderr
        ),
        cache_logger_on_first_use=False,
    )
    handler: logging.Handler = logging.StreamHandler(stream) if stream else _CurrentStderr()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(level_no, logging.INFO) if level_no < logging.INFO else level_no)
