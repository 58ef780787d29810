"""A run's curves as one PNG (for terminals, issues and chat): the charts `chart.layout` draws,
painted with Pillow in a grid of two columns under the run's title."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from rlctl.adapters.reports.chart import INK, Box, Chart, Dot, Line, Text, layout
from rlctl.application.ports.run_report import RunReport

PANEL_W, PANEL_H = 640, 340
COLUMNS = 2
HEADER = 44

_ANCHOR = {"start": "l", "middle": "m", "end": "r"}
_BASELINE = {"top": "t", "middle": "m"}


@cache
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the small bitmap font
        return ImageFont.load_default()


def paint(draw: ImageDraw.ImageDraw, chart: Chart, left: float, top: float) -> None:
    """The chart's shapes on `draw`, its top-left corner at (`left`, `top`)."""
    for shape in chart.shapes:
        if isinstance(shape, Line):
            points = [(left + x, top + y) for x, y in shape.points]
            draw.line(points, fill=shape.colour, width=max(1, round(shape.width)), joint="curve")
        elif isinstance(shape, Dot):
            x, y, r = left + shape.x, top + shape.y, shape.radius
            draw.ellipse([x - r, y - r, x + r, y + r], fill=shape.colour)
        elif isinstance(shape, Text):
            anchor = _ANCHOR[shape.anchor] + _BASELINE[shape.baseline]
            font = _font(shape.size)
            position = (left + shape.x, top + shape.y)
            draw.text(position, shape.text, fill=shape.colour, font=font, anchor=anchor)
        elif isinstance(shape, Box):
            corner = (left + shape.x, top + shape.y)
            far = (corner[0] + shape.width, corner[1] + shape.height)
            draw.rectangle([corner, far], outline=shape.colour, width=1)


def write_curves_png(report: RunReport, path: str | Path) -> Path:
    panels = report.panels
    rows = max(1, math.ceil(len(panels) / COLUMNS))
    columns = min(COLUMNS, max(1, len(panels)))
    image = Image.new("RGB", (columns * PANEL_W, HEADER + rows * PANEL_H), "#ffffff")
    draw = ImageDraw.Draw(image)
    draw.text((14, 12), report.title, fill=INK, font=_font(20))
    for i, panel in enumerate(panels):
        chart = layout(panel, PANEL_W, PANEL_H, title=True, legend=True)
        paint(draw, chart, (i % COLUMNS) * PANEL_W, HEADER + (i // COLUMNS) * PANEL_H)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG", optimize=True)
    return path
