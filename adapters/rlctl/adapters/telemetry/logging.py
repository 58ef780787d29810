"""structlog, configured once: key=value on a terminal, JSON lines on request."""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

LogFormat = Literal["console", "json"]
LEVELS = ("debug", "info", "warning", "error", "critical")


def configure_logging(
    level: str = "info", fmt: LogFormat = "console", stream: TextIO | None = None
) -> None:
    """Route structlog and the stdlib `logging` records through one renderer on stderr."""
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
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(level_no, logging.INFO) if level_no < logging.INFO else level_no)
