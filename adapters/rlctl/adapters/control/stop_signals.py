"""Ctrl-C and SIGTERM while work runs: stop at once, but never lose what is being saved.

`StopSignals` is installed for a training session or a recording (main thread only; signals
reach no other); `what` names what its saves write ("the checkpoint", "the recording"):

- the first SIGINT or SIGTERM raises KeyboardInterrupt where the program is, as Python's own
  handler would — except while an update is applied (`update()`), where it waits for the block
  to end, so an interrupt never leaves half the parameters stepped;
- every later one is only counted: `uv run` forwards the terminal's Ctrl-C a second time, and a
  supervisor may repeat its SIGTERM, so a second signal must not cut the save that the first one
  started. Signals closer together than `SAME_PRESS_S` count as one key press; each press is
  answered with "please wait", and the `ABANDON_AFTER`-th one (since the stop, or since the save
  began) forces its way: inside a save it abandons that checkpoint (KeyboardInterrupt inside the
  save, whose atomic write leaves the previous checkpoint and `last` untouched);
- a first interrupt that arrives during a periodic save is held until the save is complete and
  raised by the next `raise_pending()`.

Messages go straight to stderr's file descriptor: a signal handler must not re-enter a buffered
stream that the interrupted code may be writing to.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# `uv run` re-sends the terminal's SIGINT within milliseconds; a person presses slower.
SAME_PRESS_S = 0.25
# Presses during one save that abandon it (counted after the one that stopped training).
ABANDON_AFTER = 3
_DEFAULTS: dict[int, tuple[Any, ...]] = {
    signal.SIGINT: (signal.default_int_handler, signal.SIG_DFL),
    signal.SIGTERM: (signal.SIG_DFL,),
}


def _say(text: str) -> None:
    with suppress(OSError):
        os.write(2, f"\n{text}\n".encode())


class StopSignals:
    def __init__(
        self,
        *,
        what: str = "the checkpoint",
        kept: str = "the previous checkpoint is kept",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`what` its saves write; `kept`: what survives a save abandoned halfway."""
        self._what = what
        self._kept = kept
        self._clock = clock
        self._previous: dict[int, Any] = {}
        self.stop_requested = False
        self._pending = False  # a first stop held back by `update()` or `saving()`
        self._holding = 0
        self._saving = False
        self._presses = 0  # since the stop, or since the save began
        self._last_signal: float | None = None

    # --- installation ----------------------------------------------------------------------

    def install(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread() or self._previous:
            return self
        for signum in SIGNALS:
            # Only over Python's defaults: a program embedding training keeps its own handlers.
            if signal.getsignal(signum) not in _DEFAULTS[signum]:
                continue
            with suppress(ValueError, OSError):  # not settable here (embedded interpreter)
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def uninstall(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    # --- the handler -----------------------------------------------------------------------

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        now = self._clock()
        same_press = self._last_signal is not None and now - self._last_signal < SAME_PRESS_S
        self._last_signal = now
        if not self.stop_requested:
            self.stop_requested = True
            if self._holding or self._saving:
                self._pending = True
                if self._saving:
                    _say(self._waiting(ABANDON_AFTER))
                return
            raise KeyboardInterrupt
        if same_press:
            return
        self._presses += 1
        left = ABANDON_AFTER - self._presses
        if left > 0:
            _say(self._waiting(left))
            return
        self._presses = 0
        if self._saving:
            _say(f"abandoning {self._what}: {self._kept}")
        elif self._holding:  # never half an update, however often one presses
            self._pending = True
            return
        raise KeyboardInterrupt

    # --- blocks ----------------------------------------------------------------------------

    @contextmanager
    def update(self) -> Iterator[None]:
        """Hold a first interrupt until the block ends (the optimiser step)."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
        if not self._holding and not self._saving:
            self.raise_pending()

    @contextmanager
    def saving(self) -> Iterator[None]:
        """Finish a checkpoint through interrupts, unless the user insists (see the module)."""
        self._saving = True
        self._presses = 0
        try:
            yield
        finally:
            self._saving = False

    def raise_pending(self) -> None:
        """Raise the interrupt that came while an update or a save could not be cut."""
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt

    def _waiting(self, left: int) -> str:
        times = "once more" if left == 1 else f"{left} more times"
        if self._saving:
            return (
                f"saving {self._what}, please wait (press Ctrl-C {times} to abandon it; "
                f"{self._kept})"
            )
        return f"stopping, please wait (press Ctrl-C {times} to force it)"
