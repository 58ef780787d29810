"""A run's report as one self-contained HTML file: the SVG charts of `chart`, a little inline JS
for reading values under the pointer, tables, the config, and the videos (referenced relative to
the page, or embedded as data URLs)."""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import math
import os
from importlib import resources
from pathlib import Path
from typing import Any

from rlctl.adapters.reports.chart import PALETTE, layout, svg
from rlctl.application.ports.run_report import Panel, RunReport, Table

WIDTH, HEIGHT = 560, 250

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1f21;
  background: #f7f7f5; }
header { padding: 14px 24px; background: #fff; border-bottom: 1px solid #dcdcd8; }
header h1 { margin: 0; font-size: 20px; }
header .where { color: #6b6f73; font-size: 13px; word-break: break-all; }
main { padding: 12px 24px 40px; }
h2 { font-size: 16px; margin: 22px 0 8px; }
.facts { display: flex; flex-wrap: wrap; gap: 10px; }
.fact { background: #fff; border: 1px solid #dcdcd8; border-radius: 6px; padding: 8px 12px; }
.fact b { display: block; font-size: 12px; color: #6b6f73; font-weight: 500; }
.note { color: #9a3412; }
.panels { display: flex; flex-wrap: wrap; gap: 14px; }
figure.chart { margin: 0; background: #fff; border: 1px solid #dcdcd8; border-radius: 6px;
  padding: 8px; }
figure.chart figcaption { font-weight: 600; font-size: 13px; }
figure.chart .readout { font-size: 12px; color: #444; min-height: 1.3em;
  font-variant-numeric: tabular-nums; }
.legend { font-size: 12px; display: flex; flex-wrap: wrap; gap: 2px 12px; }
.legend i { display: inline-block; width: 12px; height: 3px; vertical-align: middle;
  margin-right: 4px; }
table { border-collapse: collapse; background: #fff; font-size: 13px;
  font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #dcdcd8; padding: 4px 10px; text-align: right; }
th { background: #f1efe9; }
td.text { text-align: left; }
.videos { display: flex; flex-wrap: wrap; gap: 12px; }
.videos figure { margin: 0; background: #111; color: #ddd; border-radius: 6px; overflow: hidden; }
.videos video { display: block; width: 320px; background: #000; }
.videos figcaption { font-size: 12px; padding: 4px 8px; }
pre { background: #fff; border: 1px solid #dcdcd8; padding: 10px; overflow-x: auto;
  font-size: 12px; }
"""


def script() -> str:
    """The page's script (`static/report.js`, type-checked with the viewer's), safe to inline."""
    file = resources.files("rlctl.adapters.reports").joinpath("static", "report.js")
    return file.read_text("utf-8").replace("</", "<\\/")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _finite(values: tuple[float, ...]) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in values]  # JSON has no NaN


def chart_figure(panel: Panel, index: int) -> str:
    """The panel's chart with its legend, a readout of the values under the pointer, and the
    values the readout reads."""
    legend = "".join(
        f'<span><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{_e(s.name)}</span>'
        for i, s in enumerate(panel.series)
    )
    series = [{"name": s.name, "x": _finite(s.x), "y": _finite(s.y)} for s in panel.series]
    payload = json.dumps(series, separators=(",", ":")).replace("</", "<\\/")
    return (
        f'<figure class="chart" id="chart-{index}"><figcaption>{_e(panel.title)}</figcaption>'
        f"{svg(layout(panel, WIDTH, HEIGHT))}"
        f'<div class="legend">{legend}</div><div class="readout"></div>'
        f'<script type="application/json">{payload}</script></figure>'
    )


def _cell(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}"
        return f"<td>{_e(text)}</td>"
    if isinstance(value, (int, bool)) or value is None:
        return f"<td>{_e('' if value is None else value)}</td>"
    return f'<td class="text">{_e(value)}</td>'


def table_html(table: Table) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    rows = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in table.rows)
    return f"<h2>{_e(table.title)}</h2><table><tr>{head}</tr>{rows}</table>"


def _video_source(run: Path, relative: str, page_dir: Path, embed: bool) -> str:
    path = run / relative
    if embed:
        data = base64.b64encode(path.read_bytes()).decode()
        kind = "webm" if path.suffix.lower() == ".webm" else "mp4"
        return f"data:video/{kind};base64,{data}"
    return Path(os.path.relpath(path, page_dir)).as_posix()


def report_html(
    report: RunReport, page_dir: Path, *, embed_videos: bool = False, refresh_s: int = 0
) -> str:
    run = Path(report.location)
    refresh = f'<meta http-equiv="refresh" content="{int(refresh_s)}">' if refresh_s > 0 else ""
    facts = "".join(
        f'<div class="fact"><b>{_e(label)}</b>{_e(value)}</div>' for label, value in report.facts
    )
    notes = "".join(f'<p class="note">{_e(note)}</p>' for note in report.notes)
    charts = "".join(chart_figure(panel, i) for i, panel in enumerate(report.panels))
    body = [
        f"<header><h1>{_e(report.title)}</h1>"
        f'<div class="where">{_e(report.location)} · report written '
        f"{dt.datetime.now():%Y-%m-%d %H:%M:%S}</div></header><main>",
        f'<div class="facts">{facts}</div>{notes}',
    ]
    if charts:
        body.append(f'<h2>Curves</h2><div class="panels">{charts}</div>')
    body.extend(table_html(t) for t in report.tables)
    if report.videos:
        figures = "".join(
            f'<figure><video controls muted preload="metadata" '
            f'src="{_e(_video_source(run, v.path, page_dir, embed_videos))}"></video>'
            f"<figcaption>{_e(v.label)}</figcaption></figure>"
            for v in report.videos
        )
        body.append(f'<h2>Videos</h2><div class="videos">{figures}</div>')
    if report.config is not None:
        config = json.dumps(report.config, indent=2, default=str)
        body.append(
            f"<h2>Config</h2><details open><pre>{html.escape(config, quote=False)}</pre></details>"
        )
    body.append("</main>")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(report.title)}</title>{refresh}<style>{STYLE}</style></head><body>"
        + "".join(body)
        + f"<script>{script()}</script></body></html>\n"
    )
