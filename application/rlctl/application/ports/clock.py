"""Time for control loops: a monotonic `now` and a precise `sleep_until`.

Loops schedule absolute deadlines (`start + k * period`) rather than sleeping a period after
each tick, so jitter in one tick does not accumulate. A manual clock stands in for tests.
"""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic clock (only differences mean anything)."""
        ...

    def sleep_until(self, deadline: float) -> None:
        """Return at `deadline` (as `now` counts), as closely as the platform allows; at once
        when it has passed."""
        ...
