"""CheckDataset: read every file and index of a dataset and list each problem found."""

from __future__ import annotations

import attrs

from rlctl.application.ports.dataset_tools import DatasetChecker, DatasetProblem
from rlctl.application.ports.progress import Progress


@attrs.frozen
class CheckReport:
    location: str
    problems: tuple[DatasetProblem, ...]
    files_checked: int

    @property
    def errors(self) -> tuple[DatasetProblem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[DatasetProblem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when nothing is wrong; warnings (an interrupted commit, stray files) allowed."""
        return not self.errors


class CheckDataset:
    """Problems of `meta/` first, then of each data and video file; none stops the check."""

    def __init__(self, checker: DatasetChecker, progress: Progress) -> None:
        self._checker = checker
        self._progress = progress

    def __call__(self, location: str) -> CheckReport:
        check = self._checker.open(location)
        problems = list(check.opening_problems)
        units = list(check.units)
        task = self._progress.task("checking files", total=len(units))
        try:
            for unit in units:
                problems += check.check(unit)
                task.advance()
                task.update(problems=sum(p.severity == "error" for p in problems))
        finally:
            task.close()
        return CheckReport(location, tuple(problems), files_checked=len(units))
