"""Scripted people: recording controls pressed at given ticks, and a console with set answers.

`ScriptedControls` presses controls at poll numbers (`{12: {Control.NEXT}}`: the 13th poll sees
NEXT) or when `press` is called (from a clock alarm, another thread). `ScriptedConsole` answers
prompts from a list, reports Enter after a number of polls, and keeps everything shown.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from rlctl.application.ports.control import Control, RolloutEvent
from rlctl.domain.errors import InvalidInput


class ScriptedControls:
    def __init__(self, at_poll: Mapping[int, Iterable[Control]] | None = None) -> None:
        self._script = {int(k): frozenset(v) for k, v in (at_poll or {}).items()}
        self._pending: set[Control] = set()
        self._lock = threading.Lock()
        self.polls = 0
        self.closed = False

    def press(self, *controls: Control) -> None:
        with self._lock:
            self._pending.update(controls)

    def poll(self) -> frozenset[Control]:
        with self._lock:
            pressed = frozenset(self._pending | self._script.get(self.polls, frozenset()))
            self._pending.clear()
            self.polls += 1
            return pressed

    def close(self) -> None:
        self.closed = True


class ScriptedRolloutControls:
    """Rollout keys pressed at poll numbers (`{30: {RolloutEvent.PAUSE_RESUME}}`: the 31st
    poll sees it), or when `press` is called."""

    def __init__(self, at_poll: Mapping[int, Iterable[RolloutEvent]] | None = None) -> None:
        self._script = {int(k): frozenset(v) for k, v in (at_poll or {}).items()}
        self._pending: set[RolloutEvent] = set()
        self._lock = threading.Lock()
        self.polls = 0
        self.closed = False

    def press(self, *events: RolloutEvent) -> None:
        with self._lock:
            self._pending.update(events)

    def poll(self) -> frozenset[RolloutEvent]:
        with self._lock:
            pressed = frozenset(self._pending | self._script.get(self.polls, frozenset()))
            self._pending.clear()
            self.polls += 1
            return pressed

    def close(self) -> None:
        self.closed = True


class ScriptedConsole:
    def __init__(
        self,
        answers: Sequence[str] = (),
        *,
        enter_after_polls: int = 1,
        on_poll: Callable[[int], None] | None = None,
    ) -> None:
        """`on_poll(n)` runs at each `enter_pressed` poll (to move a virtual joint, say)."""
        self._answers = list(answers)
        self._enter_after = enter_after_polls
        self._on_poll = on_poll
        self._polls = 0
        self.prompts: list[str] = []
        self.shown: list[str] = []
        self.tables: list[list[list[object]]] = []

    def ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self._answers:
            raise InvalidInput(f"the script has no answer left for {prompt!r}", where="console")
        return self._answers.pop(0)

    def show(self, text: str) -> None:
        self.shown.append(text)

    def show_table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        self.tables.append([list(row) for row in rows])

    def enter_pressed(self) -> bool:
        self._polls += 1
        if self._on_poll is not None:
            self._on_poll(self._polls)
        if self._polls >= self._enter_after:
            self._polls = 0
            return True
        return False


class NoInterrupts:
    """Interrupts as an embedding program has them: Python's own, untouched. Counts saves."""

    def __init__(self) -> None:
        self.installed = False
        self.saves = 0
        self.shielding = False  # inside `saving()` now

    def install(self) -> NoInterrupts:
        self.installed = True
        return self

    def uninstall(self) -> None:
        self.installed = False

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        self.saves += 1
        outer, self.shielding = self.shielding, True
        try:
            yield
        finally:
            self.shielding = outer

    def raise_pending(self) -> None:
        pass
