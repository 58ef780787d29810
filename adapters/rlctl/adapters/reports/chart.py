"""Charts of lines over shared axes, drawn one way: `layout` turns a `Panel` into shapes (ranges,
round ticks, grid, lines broken where a value is missing, markers, labels, legend), and each
output only paints those shapes: `svg` for the HTML report and the dataset viewer, `paint` onto
a Pillow image for the report's PNG (Pillow comes with torchvision; no plotting library).

An SVG chart says where its plot is (`data-left`, `data-plot-width`, `data-x0`, `data-x1`, in
its own units) and holds a hidden `line.cursor`, so a page maps a pointer to an x value and
marks a point without redrawing.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Literal

import attrs

from rlctl.application.ports.run_report import Panel

PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)  # fmt: skip
INK, MUTED, GRID, BORDER, CURSOR = "#1d1f21", "#555555", "#e6e6e2", "#bbbbbb", "#c2410c"
SMALL, TITLE = 12, 16
# An estimate of a character's width, to wrap the legend alike in every output.
CHAR_WIDTH = 0.6 * SMALL


def nice_ticks(lo: float, hi: float, count: int = 5, min_step: float = 0.0) -> list[float]:
    """Round values (1, 2 or 5 times a power of ten apart, at least `min_step`) in [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else [0.0]
    raw = max((hi - lo) / max(1, count), min_step)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if raw <= m * power)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value += step
    return ticks


def tick_label(value: float, ticks: Sequence[float]) -> str:
    spread = max((abs(t) for t in ticks), default=0.0)
    if spread and (spread >= 1e5 or spread < 1e-3):
        return f"{value:.2g}"
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{value:.{min(decimals, 6)}f}"


@attrs.frozen
class Frame:
    """A panel's plotting box in pixels and its data ranges."""

    left: float
    top: float
    width: float
    height: float
    x_range: tuple[float, float]
    y_range: tuple[float, float]

    def x(self, value: float) -> float:
        lo, hi = self.x_range
        return self.left + (value - lo) / (hi - lo) * self.width

    def y(self, value: float) -> float:
        lo, hi = self.y_range
        return self.top + (1 - (value - lo) / (hi - lo)) * self.height


def data_ranges(panel: Panel) -> tuple[tuple[float, float], tuple[float, float]]:
    """The x and y ranges to draw: the finite data's, with a margin above and below."""
    xs = [x for s in panel.series for x in s.x if math.isfinite(x)]
    ys = [y for s in panel.series for y in s.y if math.isfinite(y)]
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_hi - x_lo < 1e-12:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    if panel.y_limits is not None:
        return (x_lo, x_hi), panel.y_limits
    y_lo, y_hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if y_hi - y_lo < 1e-12 * max(1.0, abs(y_hi)):
        pad = abs(y_hi) * 0.1 or 0.5
        y_lo, y_hi = y_lo - pad, y_hi + pad
    else:
        margin = (y_hi - y_lo) * 0.05
        y_lo, y_hi = y_lo - margin, y_hi + margin
    return (x_lo, x_hi), (y_lo, y_hi)


# --- shapes ----------------------------------------------------------------------------------

Point = tuple[float, float]


@attrs.frozen
class Line:
    """A polyline (two points: a segment); `name` labels a data series."""

    points: tuple[Point, ...]
    colour: str
    width: float = 1.0
    name: str = ""


@attrs.frozen
class Dot:
    x: float
    y: float
    radius: float
    colour: str


@attrs.frozen
class Text:
    x: float
    y: float
    text: str
    colour: str = MUTED
    size: int = SMALL
    anchor: Literal["start", "middle", "end"] = "start"
    baseline: Literal["top", "middle"] = "middle"


@attrs.frozen
class Box:
    x: float
    y: float
    width: float
    height: float
    colour: str = BORDER


Shape = Line | Dot | Text | Box


@attrs.frozen
class Chart:
    width: int
    height: int
    frame: Frame
    shapes: tuple[Shape, ...]
    title: str


def _runs(xs: Sequence[float], ys: Sequence[float], frame: Frame) -> list[tuple[Point, ...]]:
    """The series in pixels, one run per stretch of finite values (a missing one breaks it)."""
    runs: list[tuple[Point, ...]] = []
    run: list[Point] = []
    for x, y in zip(xs, ys, strict=False):
        if math.isfinite(x) and math.isfinite(y):
            run.append((frame.x(x), frame.y(y)))
        elif run:
            runs.append(tuple(run))
            run = []
    if run:
        runs.append(tuple(run))
    return runs


def _legend_rows(names: Sequence[str], left: float, right: float) -> list[list[tuple[float, int]]]:
    """Where each legend entry starts, row by row: (x, series index)."""
    rows: list[list[tuple[float, int]]] = [[]]
    x = left
    for i, name in enumerate(names):
        width = len(name) * CHAR_WIDTH + 30
        if x + width > right and rows[-1]:
            rows.append([])
            x = left
        rows[-1].append((x, i))
        x += width
    return rows if rows[0] else []


def layout(
    panel: Panel,
    width: int,
    height: int,
    *,
    title: bool = False,
    legend: bool = False,
    x_min_step: float = 1.0,
) -> Chart:
    """The shapes of `panel` drawn in a `width` x `height` box: the title and the legend inside
    it when asked for (a page can give its own). `x_min_step` keeps x ticks apart (1: steps)."""
    left, right = 64, width - 14
    top = 14 + (TITLE + 10 if title else 0) + (SMALL + 6 if panel.y_unit else 0)
    rows = _legend_rows([s.name for s in panel.series], left, right) if legend else []
    plot_height = max(10, height - 40 - 18 * len(rows) - top)
    x_range, y_range = data_ranges(panel)
    frame = Frame(left, top, right - left, plot_height, x_range, y_range)
    bottom = top + plot_height
    shapes: list[Shape] = []
    if title:
        shapes.append(Text(14, 12, panel.title, INK, TITLE, baseline="top"))
    if panel.y_unit:
        shapes.append(Text(left, top - 6 - SMALL / 2, panel.y_unit, anchor="middle"))
    y_ticks = nice_ticks(*y_range)
    for tick in y_ticks:
        y = frame.y(tick)
        shapes.append(Line(((left, y), (right, y)), GRID))
        shapes.append(Text(left - 6, y, tick_label(tick, y_ticks), anchor="end"))
    x_ticks = nice_ticks(*x_range, count=6, min_step=x_min_step)
    for tick in x_ticks:
        x = frame.x(tick)
        shapes.append(Line(((x, bottom), (x, bottom + 4)), MUTED))
        label = tick_label(tick, x_ticks)
        shapes.append(Text(x, bottom + 6, label, anchor="middle", baseline="top"))
    shapes.append(Box(left, frame.top, frame.width, frame.height))
    shapes.append(
        Text(left + frame.width / 2, bottom + 22, panel.x_label, anchor="middle", baseline="top")
    )
    for i, series in enumerate(panel.series):
        colour = PALETTE[i % len(PALETTE)]
        runs = _runs(series.x, series.y, frame)
        shapes.extend(Line(run, colour, 1.6, series.name) for run in runs if len(run) > 1)
        points = [p for run in runs for p in run]
        if panel.markers or any(len(run) == 1 for run in runs):
            shown = points if panel.markers else [run[0] for run in runs if len(run) == 1]
            shapes.extend(Dot(x, y, 2.5, colour) for x, y in shown[:300])
    for row, entries in enumerate(rows):
        y = bottom + 48 + 18 * row
        for x, i in entries:
            colour = PALETTE[i % len(PALETTE)]
            shapes.append(Line(((x, y), (x + 14, y)), colour, 3))
            shapes.append(Text(x + 18, y, panel.series[i].name, INK))
    return Chart(width, height, frame, tuple(shapes), panel.title)


# --- SVG -------------------------------------------------------------------------------------


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _n(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


_SVG_BASELINE = {"top": "hanging", "middle": "central"}


def _svg_shape(shape: Shape) -> str:
    if isinstance(shape, Line) and not shape.name and len(shape.points) == 2:
        (x1, y1), (x2, y2) = shape.points
        return (
            f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" '
            f'stroke="{shape.colour}" stroke-width="{shape.width}"/>'
        )
    if isinstance(shape, Line):
        points = " ".join(f"{_n(x)},{_n(y)}" for x, y in shape.points)
        named = (
            f' class="series" data-name="{_e(shape.name)}"><title>{_e(shape.name)}</title>'
            "</polyline>"
            if shape.name
            else "/>"
        )
        return (
            f'<polyline points="{points}" fill="none" stroke="{shape.colour}" '
            f'stroke-width="{shape.width}"{named}'
        )
    if isinstance(shape, Dot):
        return (
            f'<circle cx="{_n(shape.x)}" cy="{_n(shape.y)}" r="{shape.radius}" '
            f'fill="{shape.colour}"/>'
        )
    if isinstance(shape, Text):
        return (
            f'<text x="{_n(shape.x)}" y="{_n(shape.y)}" fill="{shape.colour}" '
            f'font-size="{shape.size}" text-anchor="{shape.anchor}" '
            f'dominant-baseline="{_SVG_BASELINE[shape.baseline]}">{_e(shape.text)}</text>'
        )
    return (
        f'<rect x="{_n(shape.x)}" y="{_n(shape.y)}" width="{_n(shape.width)}" '
        f'height="{_n(shape.height)}" fill="none" stroke="{shape.colour}"/>'
    )


def svg(chart: Chart) -> str:
    """The chart as an `<svg>` element, with its plot's geometry and a hidden cursor line."""
    frame = chart.frame
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {chart.width} {chart.height}" '
        f'width="{chart.width}" height="{chart.height}" role="img" aria-label="{_e(chart.title)}" '
        f'font-family="system-ui, sans-serif" data-left="{_n(frame.left)}" '
        f'data-plot-width="{_n(frame.width)}" data-x0="{frame.x_range[0]!r}" '
        f'data-x1="{frame.x_range[1]!r}">'
        + "".join(_svg_shape(shape) for shape in chart.shapes)
        + f'<line class="cursor" x1="0" x2="0" y1="{_n(frame.top)}" '
        f'y2="{_n(frame.top + frame.height)}" stroke="{CURSOR}" stroke-width="1.5" '
        'visibility="hidden"/></svg>'
    )
