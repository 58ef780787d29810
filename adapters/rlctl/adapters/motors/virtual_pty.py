"""The device's end of a pseudo-terminal, for the emulated serial devices (servo buses, the
Damiao USB-CAN bridge, FashionStar servos, the Homunculus boards): the host opens `port` as it
opens a USB serial port, with pyserial or a vendor's SDK, and cannot tell the difference.

The terminal is raw (no echo, no newline translation of binary packets), and the device keeps
its end and the host's open: the master stays readable while the host closes and reopens the
port, as the SDKs do on every baud-rate change.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import tty
from collections.abc import Iterable
from types import TracebackType
from typing import Self


class PtyDevice:
    """`start` opens the terminal (`_open_pty`) and the device's threads; `stop` ends them and
    closes it (`_close_pty`); a `with` block does both."""

    # In the error for a port asked before `start`: "the virtual bus is not started".
    device_name = "virtual device"

    def __init__(self) -> None:
        self._master = self._slave = -1
        self._port = ""

    @property
    def port(self) -> str:
        if not self._port:
            raise RuntimeError(f"the {self.device_name} is not started")
        return self._port

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _open_pty(self) -> None:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        self._port = os.ttyname(self._slave)

    def _close_pty_after(
        self, threads: Iterable[threading.Thread], *others: int, timeout_s: float = 5.0
    ) -> None:
        """Close the terminal (and `others`) once every thread in `threads` has ended: now if
        they end within `timeout_s`, else when they do, from a thread of its own. Never under a
        thread still using the descriptors: the next terminal opened gets the same numbers, and a
        device thread late to stop on a loaded machine then read the next device's bytes (a
        test's bus saw neither the pings nor the torque-off its host wrote)."""
        waiting = [thread for thread in threads if thread is not threading.current_thread()]
        deadline = time.monotonic() + timeout_s
        for thread in waiting:
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        if not any(thread.is_alive() for thread in waiting):
            self._close_pty(*others)
            return

        def close_when_done() -> None:
            for thread in waiting:
                thread.join()
            self._close_pty(*others)

        threading.Thread(
            target=close_when_done, name=f"{self.device_name} closer", daemon=True
        ).start()

    def _close_pty(self, *others: int) -> None:
        """Close both ends (and `others`: a wake-up pipe's), whatever is already closed."""
        for fd in (self._master, self._slave, *others):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
