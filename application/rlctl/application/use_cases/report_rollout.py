"""The report of a rollout (`rlctl rollout`'s `rollout_info.json`): how the loop kept time, who
drove and when a person took over, how far the arm was moved between two commands.

The timeline in the file is thinned to every k-th tick (`timeline.every`): periods are the time
between two kept ticks divided by k, so a long stall between them shows as a raised average.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from rlctl.application.ports.run_report import Panel, RunRecord, RunReport, Series, Table

# Who drove a tick, as `run_rollout.Driver` names them, in the order the report draws them.
_DRIVERS = ("policy", "human", "move", "hold")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ms(value: Any) -> str:
    number = _number(value)
    return "?" if number is None else f"{1000 * number:.1f} ms"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def _periods(starts: list[float], every: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    ticks, periods = [], []
    for i in range(1, len(starts)):
        gap = starts[i] - starts[i - 1]
        ticks.append(float(i * every))
        periods.append(1000 * gap / every)
    return tuple(ticks), tuple(periods)


def _by_driver(
    drivers: list[Any], values: list[Any], every: int, scale: float = 1.0
) -> tuple[Series, ...]:
    lines = []
    for name in _DRIVERS:
        points = [
            (float(i * every), scale * v)
            for i, (d, raw) in enumerate(zip(drivers, values))
            if d == name and (v := _number(raw)) is not None
        ]
        if points:
            lines.append(Series(name, tuple(p[0] for p in points), tuple(p[1] for p in points)))
    return tuple(lines)


def rollout_report(record: RunRecord) -> RunReport:
    info: Mapping[str, Any] = record.rollout_info or {}
    timing = _mapping(info.get("timing"))
    timeline = _mapping(info.get("timeline"))
    every = timeline.get("every")
    every = every if isinstance(every, int) and every > 0 else 1
    starts = [v for v in (_number(x) for x in _list(timeline.get("start_s"))) if v is not None]
    drivers = _list(timeline.get("driver"))
    fresh = _list(timeline.get("fresh"))
    jumps = _list(timeline.get("jump"))
    target = _number(timing.get("target_s"))

    panels = []
    ticks, periods = _periods(starts, every)
    if ticks:
        lines = [Series("period", ticks, periods)]
        if target is not None:
            lines.append(Series("target", (ticks[0], ticks[-1]), (1000 * target,) * 2))
        panels.append(Panel("Loop period", "tick", tuple(lines), "ms"))
    moved = _by_driver(drivers, jumps, every)
    if moved:
        panels.append(Panel("Largest joint change from the last command", "tick", moved, "", True))
    stale = [
        (float(i * every), 0.0 if f else 1.0)
        for i, (d, f) in enumerate(zip(drivers, fresh))
        if d == "policy"
    ]
    if stale:
        xs, ys = zip(*stale)
        panels.append(
            Panel(
                "Policy ticks without a fresh action", "tick", (Series("held", xs, ys),), "", True
            )
        )

    seconds = target if target is not None else 0.0
    spans = [s for s in _list(info.get("interventions")) if len(_list(s)) == 2]
    span_rows = tuple(
        (n, first, last, last - first + 1, f"{(last - first + 1) * seconds:.1f} s")
        for n, (first, last) in enumerate(spans, start=1)
        if isinstance(first, int) and isinstance(last, int)
    )
    facts = [
        ("strategy", str(info.get("strategy", "?"))),
        ("dataset", str(info.get("dataset") or "not recorded")),
        ("episodes saved", str(len(_list(info.get("saved_episodes"))))),
        ("frames", str(info.get("frames", "?"))),
        ("ticks", str(info.get("ticks", "?"))),
        (
            "policy / human / held ticks",
            "{} / {} / {}".format(
                info.get("policy_ticks", "?"),
                info.get("human_ticks", "?"),
                info.get("held_ticks", "?"),
            ),
        ),
        ("interventions", str(len(spans))),
        ("target period", _ms(target)),
        (
            "period p50 / p95 / max",
            " / ".join(_ms(timing.get(k)) for k in ("p50_s", "p95_s", "max_s")),
        ),
        ("late ticks", str(timing.get("late_ticks", "?"))),
        ("kept real time", "yes" if timing.get("realtime") else "no"),
        ("largest policy step", f"{_number(info.get('max_policy_jump')) or 0.0:.4g}"),
        ("uploads", str(info.get("uploads", 0))),
    ]
    notes = []
    if info.get("interrupted"):
        notes.append("The rollout was interrupted (Ctrl-C); what was recorded until then is kept.")
    if _number(info.get("held_ticks")):
        notes.append(
            "Held ticks: the policy had no fresh action in time and the arm was held where it was."
        )
    return RunReport(
        kind="rollout",
        location=record.location,
        title=f"Rollout {PurePath(record.location).name}",
        facts=tuple(facts),
        panels=tuple(panels),
        tables=(
            Table(
                "Interventions (a person drove)",
                ("#", "first tick", "last tick", "ticks", "duration"),
                span_rows,
            ),
        ),
        config=record.config,
        notes=tuple(notes),
    )
