"""The loop's summary line tells the truth: paced loops report lateness, unpaced ones speed."""

from __future__ import annotations

import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.application.control_loop import Ticker


def run(ticker: Ticker, clock: ManualClock, ticks: int, work_s: float) -> str:
    for _ in range(ticks):
        ticker.tick()
        clock.advance(work_s)
    return ticker.stats().describe()


def test_a_simulated_robot_slower_than_real_time_is_not_called_on_time():
    clock = ManualClock()
    line = run(Ticker(clock, 30, realtime=False), clock, ticks=10, work_s=0.190)
    assert "not paced" in line and " late" not in line and "target" not in line
    assert "p50 190.00 ms" in line
    assert "0.18x real time at 30 fps" in line


def test_a_simulated_robot_faster_than_real_time_says_how_much_faster():
    clock = ManualClock()
    line = run(Ticker(clock, 10, realtime=False), clock, ticks=5, work_s=0.010)
    assert "10.00x real time at 10 fps" in line


@pytest.mark.parametrize(("work_s", "late"), [(0.010, 0), (0.060, 9)])
def test_a_paced_loop_reports_its_late_ticks(work_s, late):
    clock = ManualClock()
    line = run(Ticker(clock, 30), clock, ticks=10, work_s=work_s)
    assert "target 33.33 ms" in line and f"{late} late" in line
