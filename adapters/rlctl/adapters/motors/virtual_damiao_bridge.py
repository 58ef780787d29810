"""Damiao's USB-CAN serial bridge emulated on a pseudo-terminal: the host opens `bridge.port` as
the bridge's serial device; the 30-byte frames it writes go onto a python-can channel (where
`VirtualDamiaoMotors` answer), and every frame on that channel comes back as the bridge's 16-byte
frame.

    with VirtualDamiaoMotors("rig", motors), VirtualDamiaoBridge("rig") as bridge:
        ...  # --robot.can_adapter=damiao --robot.port=<bridge.port>
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from typing import Any, Self

from rlctl.adapters.motors import damiao_serial
from rlctl.adapters.motors.virtual_pty import PtyDevice


class VirtualDamiaoBridge(PtyDevice):
    device_name = "virtual Damiao bridge"

    def __init__(self, channel: str, *, interface: str = "virtual") -> None:
        self.channel = channel
        self._interface = interface
        self._can: Any = None
        super().__init__()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Self:
        import can

        self._can = can.Bus(interface=self._interface, channel=self.channel)
        self._open_pty()
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._to_can, name="virtual-dm-bridge-tx", daemon=True),
            threading.Thread(target=self._from_can, name="virtual-dm-bridge-rx", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        threads, self._threads = self._threads, []
        self._close_pty_after(threads)
        if self._can is not None:
            self._can.shutdown()
            self._can = None

    def _to_can(self) -> None:
        import can

        buffer = bytearray()
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master], [], [], 0.05)
            if not ready:
                continue
            try:
                buffer += os.read(self._master, 4096)
            except OSError:
                return
            while len(buffer) >= 30:
                start = buffer.find(damiao_serial.TX_HEAD)
                if start < 0:
                    del buffer[:-3]
                    break
                del buffer[:start]
                if len(buffer) < 30:
                    break
                frame = damiao_serial.decode_tx(bytes(buffer[:30]))
                del buffer[:30]
                if frame is not None:
                    arbitration_id, data, extended = frame
                    self._can.send(
                        can.Message(
                            arbitration_id=arbitration_id, data=data, is_extended_id=extended
                        )
                    )

    def _from_can(self) -> None:
        while not self._stop.is_set():
            msg = self._can.recv(timeout=0.05)
            if msg is None:
                continue
            raw = damiao_serial.encode_rx(
                msg.arbitration_id, bytes(msg.data), extended=msg.is_extended_id
            )
            with contextlib.suppress(OSError):
                os.write(self._master, raw)
