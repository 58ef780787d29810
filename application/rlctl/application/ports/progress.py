"""Progress of long work (recording, encoding, training, evaluation, conversion)."""

from __future__ import annotations

from typing import Any, Protocol


class ProgressTask(Protocol):
    def advance(self, n: int = 1) -> None: ...

    def update(self, **fields: Any) -> None:
        """Show running figures beside the bar (loss, success rate …)."""

    def close(self) -> None: ...


class Progress(Protocol):
    """Starts tasks; a terminal adapter draws bars, others stay silent."""

    def task(self, description: str, total: int | None = None) -> ProgressTask: ...
