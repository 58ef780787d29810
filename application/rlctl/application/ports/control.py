"""What a person at the machine says while work runs.

- `RecordControls`: keys pressed during recording (next, re-record, stop), latched until polled,
  so a key pressed between two ticks is never missed.
- `RolloutControls`: keys (or a foot pedal) pressed while a policy acts on a robot: pause and
  resume, a human's correction, upload, save the last seconds, next, re-record, stop.
- `Console`: questions and answers for interactive procedures (calibration, motor setup): a
  prompt that waits for a line, messages, and a non-blocking "was Enter pressed?".
- `Interrupts`: Ctrl-C and SIGTERM while a command runs. The first stops the work
  (`KeyboardInterrupt` where it is); later ones, which `uv run` sends a second time on its own,
  must not cut what is being saved.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Protocol


class Control(enum.StrEnum):
    # End the current phase now: the episode is kept, or the reset is cut short.
    NEXT = "next"
    # End the current phase now and record the episode again (its frames are dropped).
    RERECORD = "rerecord"
    # End now and stop recording; the episode under way is kept, as LeRobot keeps it.
    STOP = "stop"


class RecordControls(Protocol):
    def poll(self) -> frozenset[Control]:
        """Every control pressed since the last poll (empty when none); they are cleared."""
        ...

    def close(self) -> None:
        """Stop listening and give the terminal back as it was; safe to call twice."""
        ...


class RolloutEvent(enum.StrEnum):
    # DAgger: pause the policy (the arm holds) / resume it.
    PAUSE_RESUME = "pause_resume"
    # DAgger: start / end a correction (a person drives with the teleoperator).
    CORRECTION = "correction"
    # Upload the dataset now (DAgger's upload key, the highlight push key).
    UPLOAD = "upload"
    # Highlight: store the ring buffer and record on / end that episode.
    SAVE = "save"
    # Episodic: end the phase now / record the episode again.
    NEXT = "next"
    RERECORD = "rerecord"
    # End the rollout (what is recorded so far is kept).
    STOP = "stop"


class RolloutControls(Protocol):
    def poll(self) -> frozenset[RolloutEvent]:
        """Every event pressed since the last poll (empty when none); they are cleared."""
        ...

    def close(self) -> None:
        """Stop listening and give the terminal (or the device) back; safe to call twice."""
        ...


class Console(Protocol):
    def ask(self, prompt: str) -> str:
        """Show `prompt` and wait for one line of answer (without its newline)."""
        ...

    def show(self, text: str) -> None:
        """A message for the person (instructions, where a file was saved)."""
        ...

    def show_table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """A small live table (motor ranges while they are recorded), redrawn in place."""
        ...

    def enter_pressed(self) -> bool:
        """Whether Enter was pressed since the last call; never waits."""
        ...


class Interrupts(Protocol):
    def install(self) -> object:
        """Take over Ctrl-C and SIGTERM (only where nobody else has: an embedding program keeps
        its own handlers)."""
        ...

    def uninstall(self) -> None:
        """Give the signals back as they were."""
        ...

    def saving(self) -> AbstractContextManager[None]:
        """A save that interrupts do not cut: a first one waits for its end (`raise_pending`),
        later ones are answered "please wait" until the person insists."""
        ...

    def raise_pending(self) -> None:
        """Raise the `KeyboardInterrupt` that arrived during a save, if one did."""
        ...


def describe_controls(keys: Mapping[Control, str]) -> str:
    """`"next episode: → or n; re-record: ← or r; stop: Esc or q"` for the keys an adapter reads."""
    names = {
        Control.NEXT: "next episode",
        Control.RERECORD: "re-record",
        Control.STOP: "stop",
    }
    return "; ".join(f"{names[c]}: {keys[c]}" for c in Control if c in keys)
