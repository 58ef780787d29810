"""The hand-over between a capture thread and the control loop: the newest frame, numbered.

The capture thread `publish`es each frame; readers either take the newest (`latest`) or wait for
one newer than the last they saw (`wait_newer`). A capture that dies `fail`s, and every reader
gets that error instead of waiting for frames that will not come.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from rlctl.domain.errors import HardwareError


class LatestFrame:
    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._frame: np.ndarray | None = None
        self._sequence = 0
        self._captured_at = 0.0
        self._error: HardwareError | None = None

    def publish(self, frame: np.ndarray) -> None:
        with self._ready:
            self._frame = frame
            self._sequence += 1
            self._captured_at = time.monotonic()
            self._ready.notify_all()

    def fail(self, error: HardwareError) -> None:
        with self._ready:
            self._error = error
            self._ready.notify_all()

    def clear(self) -> None:
        with self._ready:
            self._frame = None
            self._error = None
            self._captured_at = 0.0

    @property
    def sequence(self) -> int:
        return self._sequence

    def latest(self) -> tuple[np.ndarray | None, int, float]:
        """(frame, its number, its age in seconds); frame None before the first one."""
        with self._ready:
            self._raise_failure()
            age = time.monotonic() - self._captured_at if self._frame is not None else float("inf")
            return self._frame, self._sequence, age

    def wait_newer(self, sequence: int, timeout_s: float) -> tuple[np.ndarray, int] | None:
        """The newest frame numbered above `sequence`, waiting up to `timeout_s`; None if none."""
        deadline = time.monotonic() + timeout_s
        with self._ready:
            while True:
                self._raise_failure()
                if self._frame is not None and self._sequence > sequence:
                    return self._frame, self._sequence
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._ready.wait(remaining)

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise self._error
