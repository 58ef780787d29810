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
import tty
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
