"""The run's report is rewritten while training at most every `every_s`, and once at the end."""

from __future__ import annotations

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.application.use_cases.report_while_training import RefreshingReport
from rlctl.domain.errors import InvalidInput


def test_writes_go_through_and_the_report_follows_at_its_rate():
    clock, inner, calls = ManualClock(), RecordingMetricsSink(), []
    sink = RefreshingReport(
        inner,
        "runs/a",
        write_report=lambda run, **kw: calls.append((run, kw)),
        every_s=10,
        clock=clock,
    )
    for step in range(1, 7):
        sink.write(step, {"loss": 1.0 / step})
        clock.advance(4)
    sink.close()
    assert inner.steps() == [1, 2, 3, 4, 5, 6] and inner.closed
    # Steps come at t=0, 4, ..., 20: the report follows at t=0 and 12 (10 s apart at least),
    # then the final page, which stops reloading.
    assert calls == [("runs/a", {"refresh_s": 10})] * 2 + [("runs/a", {"refresh_s": 0})]


def test_a_report_that_fails_does_not_stop_training():
    clock, inner = ManualClock(), RecordingMetricsSink()

    def broken(run, **kw):
        raise InvalidInput("metrics.jsonl holds no JSON", where=run)

    sink = RefreshingReport(inner, "runs/a", write_report=broken, every_s=1, clock=clock)
    sink.write(1, {"loss": 1.0})
    sink.close()
    assert sink.written == 0 and inner.closed
