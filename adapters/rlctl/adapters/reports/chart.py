"""Axes arithmetic shared by the SVG and PNG charts: ranges, round ticks, data → pixels."""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from rlctl.application.ports.run_report import Panel

PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)  # fmt: skip


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
    if panel.y_limits is not None:
        return _data_ranges(panel)[0], panel.y_limits
    return _data_ranges(panel)


def _data_ranges(panel: Panel) -> tuple[tuple[float, float], tuple[float, float]]:
    xs = [x for s in panel.series for x in s.x]
    ys = [y for s in panel.series for y in s.y]
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y_lo, y_hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if x_hi - x_lo < 1e-12:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    if y_hi - y_lo < 1e-12 * max(1.0, abs(y_hi)):
        pad = abs(y_hi) * 0.1 or 0.5
        y_lo, y_hi = y_lo - pad, y_hi + pad
    else:
        margin = (y_hi - y_lo) * 0.05
        y_lo, y_hi = y_lo - margin, y_hi + margin
    return (x_lo, x_hi), (y_lo, y_hi)
