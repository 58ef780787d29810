"""The `ReportRenderer` port: HTML with inline SVG, and a PNG of the curves."""

from __future__ import annotations

from pathlib import Path

from rlctl.adapters.reports.html import report_html
from rlctl.adapters.reports.png import write_curves_png
from rlctl.application.ports.run_report import RunReport


class HtmlReportRenderer:
    def write_html(
        self, report: RunReport, path: str, *, embed_videos: bool = False, refresh_s: int = 0
    ) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = report_html(
            report, target.parent.resolve(), embed_videos=embed_videos, refresh_s=refresh_s
        )
        # Written aside then renamed: a browser refreshing it never reads half a page.
        partial = target.with_name(target.name + ".partial")
        try:
            partial.write_text(text, encoding="utf-8")
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)

    def write_png(self, report: RunReport, path: str) -> None:
        write_curves_png(report, path)
