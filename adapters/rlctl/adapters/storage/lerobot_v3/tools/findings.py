"""Collecting a check's problems, each with the file (relative to the root), key and episode."""

from __future__ import annotations

from pathlib import Path

from rlctl.application.ports.dataset_tools import DatasetProblem, Severity
from rlctl.domain.errors import RlctlError

# Beyond this many problems of one kind in one file, the rest are counted, not listed.
MAX_PER_KIND = 20


class Findings:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[DatasetProblem] = []
        self._kinds: dict[tuple[str | None, str], int] = {}

    def relative(self, path: Path | str) -> str:
        path = Path(path)
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def add(
        self,
        message: str,
        *,
        file: Path | str | None = None,
        key: str | None = None,
        episode: int | None = None,
        hint: str | None = None,
        severity: Severity = "error",
        kind: str | None = None,
    ) -> None:
        name = self.relative(file) if file is not None else None
        if kind is not None:
            seen = self._kinds[(name, kind)] = self._kinds.get((name, kind), 0) + 1
            if seen > MAX_PER_KIND:
                return
        self.items.append(DatasetProblem(message, name, key, episode, hint, severity))

    def warning(self, message: str, **where: object) -> None:
        self.add(message, severity="warning", **where)  # type: ignore[arg-type]

    def from_error(self, error: RlctlError, file: Path | str, **where: object) -> None:
        self.add(error.message, file=file, hint=error.hint, **where)  # type: ignore[arg-type]

    def summarize_kinds(self) -> None:
        """One line per kind whose problems were too many to list."""
        for (name, kind), seen in self._kinds.items():
            if seen > MAX_PER_KIND:
                self.items.append(
                    DatasetProblem(f"... and {seen - MAX_PER_KIND} more: {kind}", name)
                )
        self._kinds.clear()

    def take(self) -> list[DatasetProblem]:
        self.summarize_kinds()
        items, self.items = self.items, []
        return items
