"""A training run's report, kept fresh while it trains (`rlctl train --report_refresh_s=60`).

`RefreshingReport` is a `MetricsSink` in front of the run's own sinks: every write goes through to
them first (so `metrics.jsonl` holds the step), then, at most every `every_s` seconds of the
clock, the report is written again; closing the sink writes the final one. The page reloads
itself at the same rate. A report that cannot be written is logged and training goes on: a
report is never worth a lost run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from rlctl.application.ports.clock import Clock
from rlctl.application.ports.training import MetricsSink
from rlctl.domain.errors import RlctlError

log = structlog.get_logger(__name__)

# Writes the report of the run folder; `refresh_s` makes the page reload itself.
WriteReport = Callable[..., object]


class RefreshingReport:
    def __init__(
        self,
        inner: MetricsSink,
        run_dir: str,
        *,
        write_report: WriteReport,
        every_s: float,
        clock: Clock,
    ) -> None:
        self._inner = inner
        self._write_report = write_report
        self._run_dir = run_dir
        self._every_s = every_s
        self._clock = clock
        self._last: float | None = None
        self.written = 0

    def write(self, step: int, metrics: Mapping[str, float], *, phase: str = "train") -> None:
        self._inner.write(step, metrics, phase=phase)
        now = self._clock.now()
        if self._last is None or now - self._last >= self._every_s:
            self._last = now
            self._refresh(refresh_s=max(1, round(self._every_s)))

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._refresh(refresh_s=0)  # the final page stops reloading

    def _refresh(self, *, refresh_s: int) -> None:
        try:
            self._write_report(self._run_dir, refresh_s=refresh_s)
        except (RlctlError, OSError) as error:
            log.warning(
                "the run's report could not be written", run=self._run_dir, error=str(error)
            )
            return
        self.written += 1
