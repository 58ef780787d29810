"""A clock that moves only when told: loops under test run instantly and deterministically.

`sleep_until` jumps to the deadline; `advance` stands for work taking time. `on_time` runs a
callback once the clock reaches a moment (a key pressed 2 s into an episode).
"""

from __future__ import annotations

from collections.abc import Callable


class ManualClock:
    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self.sleeps: list[float] = []
        self._alarms: list[tuple[float, Callable[[], None]]] = []

    def now(self) -> float:
        return self._now

    def sleep_until(self, deadline: float) -> None:
        if deadline > self._now:
            self.sleeps.append(deadline - self._now)
            self._set(deadline)

    def advance(self, seconds: float) -> None:
        self._set(self._now + max(0.0, seconds))

    def on_time(self, moment: float, callback: Callable[[], None]) -> None:
        self._alarms.append((moment, callback))
        self._alarms.sort(key=lambda alarm: alarm[0])

    def _set(self, moment: float) -> None:
        self._now = moment
        while self._alarms and self._alarms[0][0] <= self._now:
            _, callback = self._alarms.pop(0)
            callback()
