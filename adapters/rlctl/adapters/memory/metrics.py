"""A metrics sink that keeps every record, for tests and embedding."""

from __future__ import annotations

from collections.abc import Mapping

import attrs


@attrs.frozen
class MetricsRecord:
    step: int
    phase: str
    metrics: dict[str, float]


class RecordingMetricsSink:
    def __init__(self) -> None:
        self.records: list[MetricsRecord] = []
        self.closed = False

    def write(self, step: int, metrics: Mapping[str, float], *, phase: str = "train") -> None:
        self.records.append(MetricsRecord(step, phase, dict(metrics)))

    def close(self) -> None:
        self.closed = True

    def steps(self, phase: str = "train") -> list[int]:
        return [r.step for r in self.records if r.phase == phase]
