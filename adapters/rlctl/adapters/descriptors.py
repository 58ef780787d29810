"""Closing file descriptors that threads read: never under a thread still using them.

A descriptor's number is given to the next file opened once it is closed. A reading thread late
to see its stop flag (a loaded machine) then reads that other file by the same number, taking
bytes meant for someone else: an emulated bus's pings, the next device's frames.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable


def close_after(
    threads: Iterable[threading.Thread], fds: Iterable[int], *, name: str, timeout_s: float = 5.0
) -> None:
    """Close `fds` once every thread in `threads` has ended: now if they end within
    `timeout_s`, else when they do, from a thread of its own (`name` closer)."""
    fds = tuple(fds)
    waiting = [thread for thread in threads if thread is not threading.current_thread()]
    deadline = time.monotonic() + timeout_s
    for thread in waiting:
        thread.join(timeout=max(deadline - time.monotonic(), 0.0))
    if not any(thread.is_alive() for thread in waiting):
        _close(fds)
        return

    def close_when_done() -> None:
        for thread in waiting:
            thread.join()
        _close(fds)

    threading.Thread(target=close_when_done, name=f"{name} closer", daemon=True).start()


def _close(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
