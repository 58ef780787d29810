"""Ports for reports of runs: reading what a training or evaluation run left on disk, and
writing the report (an HTML page and a PNG of its curves)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs


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
    # `rlctl rollout`'s report file (`--report_path`, or `<dataset>.rollout_info.json`).
    rollout_info: Mapping[str, Any] | None = None
    videos: Sequence[str] = ()
    checkpoints: Sequence[int] = ()
    skipped_lines: int = 0


# What a report shows, built by the `ReportRun` use case and drawn by a `ReportRenderer`.


@attrs.frozen
class Series:
    name: str
    x: tuple[float, ...]
    y: tuple[float, ...]


@attrs.frozen
class Panel:
    """One chart: lines sharing axes. `x_label` names the x axis (step, episode)."""

    title: str
    x_label: str
    series: tuple[Series, ...]
    y_unit: str = ""
    markers: bool = False
    # Fixed y limits (a percentage: 0..100); None: the data's range.
    y_limits: tuple[float, float] | None = None


@attrs.frozen
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@attrs.frozen
class Video:
    label: str
    path: str  # relative to the run folder


@attrs.frozen
class RunReport:
    kind: str  # "train", "eval" or "rollout"
    location: str
    title: str
    facts: tuple[tuple[str, str], ...]
    panels: tuple[Panel, ...]
    tables: tuple[Table, ...] = ()
    videos: tuple[Video, ...] = ()
    config: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = ()


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
