"""A virtual board whose firmware prints one line of space-separated integers every `period_s`
on a pseudo-terminal (the Homunculus glove and arm, the G1 exoskeleton's arms), with the faults
tests inject: `garble(n)` (the next n lines come out as noise: a cut line, a bad character) and
`pause()` / `resume()` (the board stops sending, then starts again)."""

from __future__ import annotations

import os
import threading
from typing import Self

from rlctl.adapters.motors.virtual_pty import PtyDevice


class VirtualLineBoard(PtyDevice):
    """A subclass says what a line holds (`_next_values`, called under `_lock`), and how many
    of its numbers a garbled line keeps before the noise (`garbled_fields`)."""

    thread_name = "virtual board"
    garbled_fields = 5

    def __init__(self, *, period_s: float) -> None:
        super().__init__()
        self._period_s = period_s
        self._lock = threading.Lock()
        self._garble = 0
        self._paused = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lines_sent = 0

    def start(self) -> Self:
        self._open_pty()
        os.set_blocking(self._master, False)
        self._thread = threading.Thread(target=self._stream, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._close_pty_after([self._thread] if self._thread is not None else [])

    # Faults

    def garble(self, lines: int = 1) -> None:
        """The next `lines` lines come out as noise (a cut line, a bad character)."""
        with self._lock:
            self._garble += lines

    def pause(self) -> None:
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    # The firmware's loop

    def _next_values(self) -> list[int]:
        raise NotImplementedError

    def _stream(self) -> None:
        while not self._stop.wait(self._period_s):
            if self._paused.is_set():
                continue
            with self._lock:
                values = self._next_values()
                if self._garble:
                    self._garble -= 1
                    line = " ".join(map(str, values[: self.garbled_fields])) + " 2x\xff7"
                else:
                    line = " ".join(map(str, values))
            try:
                os.write(self._master, (line + "\r\n").encode("utf-8", errors="replace"))
            except BlockingIOError:  # nobody reads and the buffer is full: the line is lost
                continue
            except OSError:  # closed
                return
            self.lines_sent += 1
