"""Progress bars with rich on a terminal; nothing at all when output is not a terminal."""

from __future__ import annotations

import sys
from typing import IO, Any

from rlctl.adapters.memory.progress import SilentProgress


class _RichTask:
    def __init__(self, progress: Any, task_id: int) -> None:
        self._progress = progress
        self._id = task_id
        self._closed = False

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._id, n)

    def update(self, **fields: Any) -> None:
        text = " ".join(f"{k}={_short(v)}" for k, v in fields.items())
        self._progress.update(self._id, status=text)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._progress.remove_task(self._id)
            if not self._progress.tasks:
                self._progress.stop()

    def __enter__(self) -> _RichTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class RichProgress:
    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream or sys.stderr
        self._progress: Any = None

    def task(self, description: str, total: int | None = None) -> _RichTask:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        if self._progress is None or not self._progress.live.is_started:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[status]}"),
                console=Console(file=self._stream),
                transient=False,
            )
            self._progress.start()
        task_id = self._progress.add_task(description, total=total, status="")
        return _RichTask(self._progress, task_id)


def terminal_progress(stream: IO[str] | None = None) -> RichProgress | SilentProgress:
    """Rich bars when `stream` is a terminal, silence otherwise (pipes, CI, log files)."""
    out = stream or sys.stderr
    return RichProgress(out) if getattr(out, "isatty", lambda: False)() else SilentProgress()
