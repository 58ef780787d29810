"""Reading a motor's reply without spinning.

Both vendor SDKs open the serial port with `timeout=0` and poll it in a tight loop until the
status packet is complete or the packet timeout passes. That loop takes a whole core for the
duration of every exchange; on a machine with two cores it competes with what delivers the reply
(the kernel's tty worker, a USB driver, the motor simulator) and with the recording's other work,
and under load a reply took several times longer. `WaitingReads` makes the port's `readPort`
wait in `select` for the next bytes, up to what is left of the packet timeout: the SDK's loop,
its timeouts and its results stay as they are, it just no longer burns the CPU while it waits.
"""

from __future__ import annotations

import select
from typing import Any

# A bound on one wait, so a timeout the SDK shortens while we wait is noticed soon after.
_MAX_WAIT_S = 0.05


class WaitingReads:
    """Mixin for an SDK `PortHandler` (feetech-servo-sdk, dynamixel-sdk): put it first."""

    ser: Any
    packet_timeout: float

    def readPort(self, length: int) -> bytes:  # noqa: N802 (the SDK's name)
        data = self.ser.read(length)
        if data:
            return data
        fd = getattr(self.ser, "fd", None)  # POSIX pyserial; elsewhere the SDK's polling stays
        left_s = (self.packet_timeout - self.getTimeSinceStart()) / 1e3  # type: ignore[attr-defined]
        if fd is None or left_s <= 0:
            return data
        select.select([fd], [], [], min(left_s, _MAX_WAIT_S))
        return self.ser.read(length)
