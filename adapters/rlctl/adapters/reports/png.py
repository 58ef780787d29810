"""A run's curves as one PNG (for terminals, issues and chat): a grid of panels drawn with
Pillow, which rlctl already installs (through torchvision); no plotting library."""

from __future__ import annotations

import math
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from rlctl.adapters.reports.chart import PALETTE, Frame, data_ranges, nice_ticks, tick_label
from rlctl.application.ports.run_report import Panel, RunReport

PANEL_W, PANEL_H = 640, 340
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 78, 18, 40, 70
COLUMNS = 2
BACKGROUND, INK, GRID, MUTED = "#ffffff", "#1d1f21", "#e6e6e2", "#555555"


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the small bitmap font
        return ImageFont.load_default()


def draw_panel(draw: ImageDraw.ImageDraw, panel: Panel, left: int, top: int) -> None:
    title, small = _font(17), _font(13)
    x_range, y_range = data_ranges(panel)
    frame = Frame(
        left + PAD_LEFT,
        top + PAD_TOP,
        PANEL_W - PAD_LEFT - PAD_RIGHT,
        PANEL_H - PAD_TOP - PAD_BOTTOM,
        x_range,
        y_range,
    )
    draw.text((left + 14, top + 10), panel.title, fill=INK, font=title)
    right, bottom = frame.left + frame.width, frame.top + frame.height
    y_ticks = nice_ticks(*y_range)
    for tick in y_ticks:
        y = frame.y(tick)
        draw.line([(frame.left, y), (right, y)], fill=GRID, width=1)
        draw.text(
            (frame.left - 6, y), tick_label(tick, y_ticks), fill=MUTED, font=small, anchor="rm"
        )
    x_ticks = nice_ticks(*x_range, count=6, min_step=1)
    for tick in x_ticks:
        x = frame.x(tick)
        draw.line([(x, bottom), (x, bottom + 4)], fill=MUTED, width=1)
        draw.text((x, bottom + 7), tick_label(tick, x_ticks), fill=MUTED, font=small, anchor="mt")
    draw.rectangle([frame.left, frame.top, right, bottom], outline="#bbbbbb", width=1)
    label = panel.x_label + (f"   ({panel.y_unit})" if panel.y_unit else "")
    draw.text(
        (frame.left + frame.width / 2, bottom + 26), label, fill=MUTED, font=small, anchor="mt"
    )
    for i, series in enumerate(panel.series):
        colour = PALETTE[i % len(PALETTE)]
        points = [(frame.x(x), frame.y(y)) for x, y in zip(series.x, series.y)]
        if len(points) > 1:
            draw.line(points, fill=colour, width=2, joint="curve")
        if panel.markers or len(points) == 1:
            for x, y in points[:300]:
                draw.ellipse([x - 3, y - 3, x + 3, y + 3], fill=colour)
    # The legend under the axis label, in as many rows as it needs.
    x, y = frame.left, bottom + 46
    for i, series in enumerate(panel.series):
        width = draw.textlength(series.name, font=small) + 30
        if x + width > right and x > frame.left:
            x, y = frame.left, y + 16
        draw.line([(x, y + 7), (x + 14, y + 7)], fill=PALETTE[i % len(PALETTE)], width=3)
        draw.text((x + 18, y), series.name, fill=INK, font=small)
        x += width


def write_curves_png(report: RunReport, path: str | Path) -> Path:
    panels = report.panels
    rows = max(1, math.ceil(len(panels) / COLUMNS))
    columns = min(COLUMNS, max(1, len(panels)))
    header = 44
    image = Image.new("RGB", (columns * PANEL_W, header + rows * PANEL_H), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((14, 12), report.title, fill=INK, font=_font(20))
    for i, panel in enumerate(panels):
        draw_panel(draw, panel, (i % COLUMNS) * PANEL_W, header + (i // COLUMNS) * PANEL_H)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG", optimize=True)
    return path
