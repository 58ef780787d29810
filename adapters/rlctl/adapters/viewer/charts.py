"""An episode's plots for the viewer page: the report's charts (`reports.chart`), one per plot
group, drawn here as SVG and sent with the episode's data; the page only moves their cursor."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlctl.adapters.reports.chart import PALETTE, layout, svg
from rlctl.application.dataset_pages import DatasetPage, EpisodePage
from rlctl.application.ports.run_report import Panel, Series

WIDTH, HEIGHT = 900, 200


def episode_charts(page: DatasetPage, episode: EpisodePage) -> dict[str, dict[str, Any]]:
    """`{group key: {"svg": ..., "colours": [one per line]}}` for the groups the episode has."""
    times = tuple(np.asarray(episode.timestamps, dtype=np.float64).tolist())
    charts: dict[str, dict[str, Any]] = {}
    for group in page.groups:
        values = episode.series.get(group.key)
        if values is None:
            continue
        columns = np.asarray(values, dtype=np.float64).reshape(len(times), -1).T
        series = tuple(
            Series(name, times, tuple(column.tolist()))
            for name, column in zip(group.names, columns, strict=False)
        )
        panel = Panel(group.key, "time (s)", series)
        charts[group.key] = {
            "svg": svg(layout(panel, WIDTH, HEIGHT, x_min_step=0.0)),
            "colours": [PALETTE[i % len(PALETTE)] for i in range(len(series))],
        }
    return charts


def episode_data(page: DatasetPage, episode: EpisodePage) -> dict[str, Any]:
    """The JSON the page reads for one episode: its data and its charts."""
    return {**episode.to_dict(), "charts": episode_charts(page, episode)}
