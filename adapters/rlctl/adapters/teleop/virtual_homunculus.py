"""A virtual Homunculus board: a pseudo-terminal printing the lines the ESP32 firmware prints.

The host side opens `board.port` like any serial device (pyserial, LeRobot); a background thread
writes one line of space-separated integers every `period_s`. Tests and demos set the readings
(`board.set(...)`, what a hand on the glove does) and inject faults:

    with VirtualHomunculusBoard.glove() as board:
        board.set(index_mcp_flexion=3000)
        board.garble(3)          # the next 3 lines come out as noise
        board.pause()            # the board stops sending (resume() starts it again)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Self

from rlctl.adapters.motors.virtual_pty import PtyDevice
from rlctl.adapters.teleop.homunculus import ARM_FIELD_OF_JOINT, ARM_FIELDS, GLOVE_JOINTS


class VirtualHomunculusBoard(PtyDevice):
    device_name = "virtual Homunculus board"

    def __init__(
        self, fields: int, joints: dict[str, int], *, period_s: float = 0.005, start: int = 2048
    ) -> None:
        """`joints`: joint name -> its field in the line; the other fields read `start` too."""
        self._joints = dict(joints)
        self._values = [start] * fields
        self._period_s = period_s
        self._lock = threading.Lock()
        self._garble = 0
        self._paused = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        super().__init__()
        self.lines_sent = 0

    @classmethod
    def glove(cls, **kwargs: float) -> VirtualHomunculusBoard:
        return cls(len(GLOVE_JOINTS), {j: i for i, j in enumerate(GLOVE_JOINTS)}, **kwargs)  # type: ignore[arg-type]

    @classmethod
    def arm(cls, **kwargs: float) -> VirtualHomunculusBoard:
        return cls(ARM_FIELDS, dict(ARM_FIELD_OF_JOINT), **kwargs)  # type: ignore[arg-type]

    def start(self) -> Self:
        self._open_pty()
        os.set_blocking(self._master, False)
        self._thread = threading.Thread(target=self._stream, name="homunculus board", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._close_pty()

    # What a hand does

    def set(self, **readings: int) -> None:
        with self._lock:
            for joint, value in readings.items():
                self._values[self._joints[joint]] = int(value)

    def set_all(self, value: int) -> None:
        with self._lock:
            self._values = [int(value)] * len(self._values)

    def reading(self, joint: str) -> int:
        with self._lock:
            return self._values[self._joints[joint]]

    @property
    def joints(self) -> Sequence[str]:
        return list(self._joints)

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

    def _stream(self) -> None:
        while not self._stop.wait(self._period_s):
            if self._paused.is_set():
                continue
            with self._lock:
                if self._garble:
                    self._garble -= 1
                    line = " ".join(map(str, self._values[:5])) + " 2x\xff7"
                else:
                    line = " ".join(map(str, self._values))
            try:
                os.write(self._master, (line + "\r\n").encode("utf-8", errors="replace"))
            except BlockingIOError:  # nobody reads and the buffer is full: the line is lost
                continue
            except OSError:  # closed
                return
            self.lines_sent += 1
