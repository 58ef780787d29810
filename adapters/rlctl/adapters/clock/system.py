"""The system clock for control loops: `time.perf_counter`, and a sleep that ends on time.

`time.sleep` wakes up late by a scheduler tick or more on a busy machine, so `sleep_until`
sleeps until `spin_s` before the deadline and spins the rest (LeRobot's `precise_sleep` does
the same on macOS and Windows only). The spin costs at most `spin_s` of CPU per tick.
"""

from __future__ import annotations

import time

DEFAULT_SPIN_S = 0.002


class SystemClock:
    def __init__(self, spin_s: float = DEFAULT_SPIN_S) -> None:
        self._spin_s = max(0.0, spin_s)

    def now(self) -> float:
        return time.perf_counter()

    def sleep_until(self, deadline: float) -> None:
        remaining = deadline - time.perf_counter()
        if remaining > self._spin_s:
            time.sleep(remaining - self._spin_s)
        while time.perf_counter() < deadline:
            pass
