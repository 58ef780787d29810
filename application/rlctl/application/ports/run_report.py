"""Ports for reports of runs: reading what a training or evaluation run left on disk, and
writing the report (an HTML page and a PNG of its curves)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from rlctl.application.use_cases.report_run import RunReport


@attrs.frozen
class RunRecord:
    """What a run folder holds, parsed but not interpreted.

    `metrics` are the records of `metrics.jsonl` in file order (`step`, `phase`, figures);
    `eval_info` is `eval_info.json`; `videos` are the video files found in the folder, as paths
    relative to it; `checkpoints` the saved steps.
    """

    location: str
    config: Mapping[str, Any] | None = None
    metrics: Sequence[Mapping[str, Any]] = ()
    eval_info: Mapping[str, Any] | None = None
    videos: Sequence[str] = ()
    checkpoints: Sequence[int] = ()
    skipped_lines: int = 0


class RunFolderReader(Protocol):
    def read(self, location: str) -> RunRecord: ...


class ReportRenderer(Protocol):
    def write_html(
        self, report: RunReport, path: str, *, embed_videos: bool = False, refresh_s: int = 0
    ) -> None:
        """One self-contained HTML file; videos are referenced relative to `path`'s folder,
        or embedded; `refresh_s` > 0 makes the page reload itself (a run still going)."""
        ...

    def write_png(self, report: RunReport, path: str) -> None:
        """The report's curves, one panel each, in one image."""
        ...
