"""The person at the terminal: recording controls from the keyboard, and prompts on stdin.

`KeyboardControls` reads the controlling terminal in cbreak mode on a background thread (no
Enter needed, Ctrl-C still interrupts): → or `n` next episode, ← or `r` re-record, Esc or `q`
stop — LeRobot's arrow keys, plus letters for terminals that mangle arrows. When stdin is not a
terminal (a pipe, a script) it reads lines instead (`n`, `r`, `q`, or `next`, `rerecord`,
`stop`). The terminal is restored on `close` and at exit, so a crash never leaves the shell
without echo.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import sys
import threading
from collections.abc import Sequence
from typing import IO, Any

from rlctl.application.ports.control import Control, describe_controls

KEYS = {Control.NEXT: "→ or n", Control.RERECORD: "← or r", Control.STOP: "Esc or q"}
_LETTERS = {"n": Control.NEXT, "r": Control.RERECORD, "q": Control.STOP, "s": Control.STOP}
_WORDS = {"next": Control.NEXT, "rerecord": Control.RERECORD, "stop": Control.STOP, **_LETTERS}
_ARROWS = {"C": Control.NEXT, "D": Control.RERECORD}
_ESC = "\x1b"
_ESCAPE_WAIT_S = 0.05  # an arrow's bytes follow its ESC at once; a lone ESC is the Esc key


def parse_keys(data: str) -> list[Control]:
    """Controls in a burst of key bytes: arrows (`ESC [ C`, `ESC O D`), Esc, letters."""
    found: list[Control] = []
    i = 0
    while i < len(data):
        char = data[i]
        if char == _ESC:
            if i + 2 < len(data) and data[i + 1] in "[O":
                if data[i + 2] in _ARROWS:
                    found.append(_ARROWS[data[i + 2]])
                i += 3
                continue
            found.append(Control.STOP)
        elif char.lower() in _LETTERS:
            found.append(_LETTERS[char.lower()])
        i += 1
    return found


class KeyboardControls:
    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdin
        self._pending: set[Control] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._saved_mode: Any = None
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        self._start()

    @property
    def keys(self) -> str:
        return describe_controls(KEYS)

    def poll(self) -> frozenset[Control]:
        with self._lock:
            pressed = frozenset(self._pending)
            self._pending.clear()
        return pressed

    def press(self, control: Control) -> None:
        with self._lock:
            self._pending.add(control)

    def close(self) -> None:
        self._stop.set()
        self._restore()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=0.5)

    # Listening

    def _start(self) -> None:
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # no real stdin (a test runner's): nothing to listen to
        self._fd = fd
        if os.isatty(fd):
            self._enter_cbreak(fd)
            target = self._read_keys
        else:
            target = self._read_lines
        self._thread = threading.Thread(target=target, name="record-controls", daemon=True)
        self._thread.start()

    def _enter_cbreak(self, fd: int) -> None:
        import termios
        import tty

        self._saved_mode = termios.tcgetattr(fd)
        tty.setcbreak(fd)
        atexit.register(self._restore)

    def _restore(self) -> None:
        if self._saved_mode is None or self._fd is None:
            return
        import termios

        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved_mode)
        self._saved_mode = None

    def _read_keys(self) -> None:
        fd = self._fd
        assert fd is not None
        while not self._stop.is_set():
            if not _readable(fd, 0.1):
                continue
            data = os.read(fd, 16).decode("utf-8", "replace")
            if data.endswith(_ESC) and _readable(fd, _ESCAPE_WAIT_S):
                data += os.read(fd, 16).decode("utf-8", "replace")
            for control in parse_keys(data):
                self.press(control)

    def _read_lines(self) -> None:
        fd = self._fd
        assert fd is not None
        buffer = b""
        while not self._stop.is_set():
            if not _readable(fd, 0.1):
                continue
            chunk = os.read(fd, 256)
            if not chunk:
                return  # end of input: no more controls will come
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                control = _WORDS.get(line.decode("utf-8", "replace").strip().lower())
                if control is not None:
                    self.press(control)


def _readable(fd: int, timeout_s: float) -> bool:
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
    except (OSError, ValueError):
        return False
    return bool(ready)


class NoControls:
    """For runs nobody watches: nothing is ever pressed."""

    def poll(self) -> frozenset[Control]:
        return frozenset()

    def close(self) -> None:
        pass


class TerminalConsole:
    """Prompts on stdin/stdout; the live table is redrawn in place on a terminal."""

    def __init__(self, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> None:
        self._in = stdin if stdin is not None else sys.stdin
        self._out = stdout if stdout is not None else sys.stdout
        self._table_lines = 0

    def ask(self, prompt: str) -> str:
        self._table_lines = 0
        self._out.write(prompt if prompt.endswith(" ") else prompt + " ")
        self._out.flush()
        line = self._in.readline()
        if not line:
            raise EOFError(f"no answer to {prompt!r}: stdin is closed")
        return line.rstrip("\n")

    def show(self, text: str) -> None:
        self._table_lines = 0
        self._out.write(text + "\n")
        self._out.flush()

    def show_table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        lines = [" | ".join(f"{h:>6}" if i else f"{h:<15}" for i, h in enumerate(header))]
        lines += [
            " | ".join(f"{v!s:>6}" if i else f"{v!s:<15}" for i, v in enumerate(row))
            for row in rows
        ]
        if self._table_lines and self._out.isatty():
            self._out.write(f"\x1b[{self._table_lines}A")
        self._out.write("\n".join(lines) + "\n")
        self._out.flush()
        self._table_lines = len(lines)

    def enter_pressed(self) -> bool:
        try:
            fd = self._in.fileno()
        except (AttributeError, OSError, ValueError):
            # Not a device (answers given in advance): each line is one Enter, as is the end.
            self._in.readline()
            return True
        if not _readable(fd, 0):
            return False
        self._in.readline()  # the line typed, or "" at the end of input: both end the wait
        return True


def keyboard_controls(enabled: bool = True) -> KeyboardControls | NoControls:
    return KeyboardControls() if enabled else NoControls()
