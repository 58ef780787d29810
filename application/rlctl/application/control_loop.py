"""Keeping a control loop at a fixed rate, and measuring how well it kept it.

`Ticker` schedules absolute deadlines: tick k is due at `start + k * period`, so a tick that runs
long borrows from the next sleep instead of shifting every later tick (LeRobot sleeps a period
minus the work after each tick, which lets errors accumulate). A tick later than a whole period
restarts the schedule from now, rather than rushing through the missed ticks back to back.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator, Sequence

import attrs
import numpy as np

from rlctl.application.ports.clock import Clock
from rlctl.application.ports.progress import Progress, ProgressTask
from rlctl.domain.errors import InvalidInput


@attrs.frozen
class LoopStats:
    """Periods between the starts of consecutive ticks, in seconds."""

    ticks: int = 0
    target_s: float = 0.0
    mean_s: float = 0.0
    p50_s: float = 0.0
    p95_s: float = 0.0
    max_s: float = 0.0
    # Ticks that started more than half a period late: a camera frame or a command was skipped.
    late_ticks: int = 0
    # False for a loop that is not paced (a simulated robot steps as fast as it can).
    realtime: bool = True

    @classmethod
    def of(
        cls,
        periods: Sequence[float],
        target_s: float,
        *,
        ticks: int,
        late_ticks: int = 0,
        realtime: bool = True,
    ) -> LoopStats:
        if not periods:
            return cls(ticks=ticks, target_s=target_s, late_ticks=late_ticks, realtime=realtime)
        values = np.asarray(periods, dtype=np.float64)
        return cls(
            ticks=ticks,
            target_s=target_s,
            mean_s=float(values.mean()),
            p50_s=float(np.percentile(values, 50)),
            p95_s=float(np.percentile(values, 95)),
            max_s=float(values.max()),
            late_ticks=late_ticks,
            realtime=realtime,
        )

    def describe(self) -> str:
        if self.mean_s == 0.0:
            return f"{self.ticks} tick(s)"
        if not self.realtime:
            # Nothing waits for the deadline: say how fast it ran, not how late it was.
            speed = self.target_s / self.mean_s
            return (
                f"{self.ticks} ticks, not paced (a simulated robot): period p50 "
                f"{self.p50_s * 1e3:.2f} ms, p95 {self.p95_s * 1e3:.2f} ms, max "
                f"{self.max_s * 1e3:.2f} ms, {speed:.2f}x real time at "
                f"{1 / self.target_s:.3g} fps"
            )
        return (
            f"{self.ticks} ticks, period p50 {self.p50_s * 1e3:.2f} ms, p95 "
            f"{self.p95_s * 1e3:.2f} ms, max {self.max_s * 1e3:.2f} ms (target "
            f"{self.target_s * 1e3:.2f} ms), {self.late_ticks} late"
        )


class Ticker:
    """Call `tick()` at the top of each iteration; it returns when that iteration is due.

    With `realtime=False` (a simulator) it never waits but still counts ticks.
    """

    def __init__(self, clock: Clock, fps: float, *, realtime: bool = True) -> None:
        if not fps > 0:
            raise InvalidInput(f"fps must be positive, got {fps!r}", where="fps")
        self._clock = clock
        self.period_s = 1.0 / fps
        self._realtime = realtime
        self._due: float | None = None
        self._last_start: float | None = None
        self.periods: list[float] = []
        self.count = 0
        self.late_ticks = 0

    def restart(self) -> None:
        """The next tick starts a new schedule (a phase begins after a pause)."""
        self._due = None
        self._last_start = None

    def tick(self) -> float:
        """Wait for this tick's deadline; returns the time it started."""
        if self._due is None:
            self._due = self._clock.now()
        else:
            self._due += self.period_s
            if self._realtime:
                self._clock.sleep_until(self._due)
        start = self._clock.now()
        self.count += 1
        if self._realtime and start - self._due > self.period_s / 2:
            self.late_ticks += 1
            if start - self._due > self.period_s:
                self._due = start
        if self._last_start is not None:
            self.periods.append(start - self._last_start)
        self._last_start = start
        return start

    def stats(self) -> LoopStats:
        return LoopStats.of(
            self.periods,
            self.period_s,
            ticks=self.count,
            late_ticks=self.late_ticks,
            realtime=self._realtime,
        )


# How soon a thread holding the interpreter lock must hand it to a loop that asks for it.
LOOP_SWITCH_INTERVAL_S = 0.001


@contextlib.contextmanager
def responsive_interpreter(switch_interval_s: float = LOOP_SWITCH_INTERVAL_S) -> Iterator[None]:
    """Keep the interpreter's own pauses out of a real-time loop while it runs.

    - Other Python threads give up the interpreter lock within `switch_interval_s` of the loop
      asking for it, not Python's default 5 ms. The loop takes the lock back after every sleep
      and every serial or camera read; a commit or a capture thread running Python meanwhile
      made each of those wait up to 5 ms, several times per tick (on a loaded 2-core machine the
      p95 period measured 38-90 ms with 5 ms, 34-39 ms with 1 ms).
    - The objects that exist when the loop starts (the imported libraries: some 60,000) are
      frozen out of the garbage collector's sight: a full collection walked them all, 49 ms
      in one go, the slowest tick of an episode. It now looks at what the loop itself made.
    """
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, switch_interval_s))
    gc.freeze()  # garbage among them too: it is collected after the loop
    try:
        yield
    finally:
        gc.unfreeze()
        sys.setswitchinterval(previous)


def loop_interpreter(
    realtime: bool, *, owns_process: bool
) -> contextlib.AbstractContextManager[None]:
    """`responsive_interpreter()` around a loop paced by real time (robots, not simulators),
    when the command owns its process (`rlctl record`, `teleoperate`, `replay`). The switch
    interval and the frozen objects are the whole interpreter's: a service that embeds a loop
    (`rlctl.api`) keeps its own, unless it asks for them with `responsive_interpreter()`."""
    if realtime and owns_process:
        return responsive_interpreter()
    return contextlib.nullcontext()


def ticks_for(seconds: float, fps: float, *, what: str) -> int:
    """How many ticks a phase of `seconds` lasts at `fps` (its frames, when recorded)."""
    if seconds < 0:
        raise InvalidInput(f"a duration cannot be negative, got {seconds!r}", where=what)
    return round(seconds * fps)


class _NoProgress:
    def advance(self, n: int = 1) -> None:
        pass

    def update(self, **fields: object) -> None:
        pass

    def close(self) -> None:
        pass


def progress_task(progress: Progress | None, description: str, total: int | None) -> ProgressTask:
    """A task of `progress`, or one that shows nothing when there is no progress port."""
    return progress.task(description, total=total) if progress is not None else _NoProgress()
