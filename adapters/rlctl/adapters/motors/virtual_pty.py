"""The device's end of a pseudo-terminal, for the emulated serial devices (servo buses, the
Damiao USB-CAN bridge, FashionStar servos, the Homunculus boards): the host opens `port` as it
opens a USB serial port, with pyserial or a vendor's SDK, and cannot tell the difference.

The terminal is raw (no echo, no newline translation of binary packets), and the device keeps
its end and the host's open: the master stays readable while the host closes and reopens the
port, as the SDKs do on every baud-rate change.
"""

from __future__ import annotations

import os
import threading
import tty
from collections.abc import Iterable
from types import TracebackType
from typing import Self

from rlctl.adapters.descriptors import close_after


class PtyDevice:
    """`start` opens the terminal (`_open_pty`) and the device's threads; `stop` ends them and
    closes it (`_close_pty_after`), once; a `with` block does both."""

    # In the error for a port asked before `start`: "the virtual bus is not started".
    device_name = "virtual device"

    def __init__(self) -> None:
        self._master = self._slave = -1
        self._port = ""
        self._open = False

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
        self._open = True

    def _close_pty_after(
        self, threads: Iterable[threading.Thread], *others: int, timeout_s: float = 5.0
    ) -> None:
        """Close the terminal (and `others`) once every thread in `threads` has ended: now if
        they end within `timeout_s`, else when they do, from a thread of its own. Never under a
        thread still using the descriptors: the next terminal opened gets the same numbers, and a
        device thread late to stop on a loaded machine then read the next device's bytes (a
        test's bus saw neither the pings nor the torque-off its host wrote). Once only: a second
        stop closing the same numbers again would close another device's terminal."""
        if not self._open:
            return
        self._open = False
        fds = (self._master, self._slave, *others)
        close_after(threads, fds, name=self.device_name, timeout_s=timeout_s)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
