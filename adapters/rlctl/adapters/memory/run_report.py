"""Run folders held in memory, and a renderer that keeps what it was asked to write."""

from __future__ import annotations

from typing import Any

from rlctl.application.ports.run_report import RunRecord, RunReport
from rlctl.domain.errors import InvalidInput


class InMemoryRunFolders:
    def __init__(self, records: dict[str, RunRecord] | None = None) -> None:
        self.records = dict(records or {})

    def read(self, location: str) -> RunRecord:
        if location not in self.records:
            raise InvalidInput("no run folder here", where=location)
        return self.records[location]


class RecordingReportRenderer:
    """`html[path]` and `png[path]` hold the reports written there, with the options."""

    def __init__(self) -> None:
        self.html: dict[str, tuple[RunReport, dict[str, Any]]] = {}
        self.png: dict[str, RunReport] = {}

    def write_html(
        self, report: RunReport, path: str, *, embed_videos: bool = False, refresh_s: int = 0
    ) -> None:
        self.html[path] = (report, {"embed_videos": embed_videos, "refresh_s": refresh_s})

    def write_png(self, report: RunReport, path: str) -> None:
        self.png[path] = report
