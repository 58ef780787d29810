"""FashionStar UART servos emulated behind a pseudo-terminal: the host opens `bus.port` like the
leader's USB adapter and speaks the real protocol; a thread answers as the servos do.

    with VirtualFashionStarBus(ids=range(7)) as bus:
        FashionStarMotorBus(bus.port, motors).connect()
        bus.move(2, -45.0)        # a hand turns servo 2
        bus.unplug(4)             # servo 4 stops answering

Each servo keeps a shaft angle (where a hand put it, in degrees, any number of turns), an origin
(`set origin point` makes the shaft's angle 0°) and a locked flag. Faults: `unplug(id)`,
`drop_replies(id, n)`, `corrupt_replies(id, n)` (a wrong checksum).
"""

from __future__ import annotations

import os
import select
import struct
import threading
from collections.abc import Callable, Iterable
from typing import Self

import attrs

from rlctl.adapters.motors import fashionstar_protocol as fs
from rlctl.adapters.motors.virtual_pty import PtyDevice


@attrs.define
class EmulatedServo:
    id: int
    shaft: float = 0.0  # degrees, as a hand turned it
    origin: float = 0.0
    locked: bool = True
    unplugged: bool = False
    drops: int = 0
    corruptions: int = 0

    @property
    def angle(self) -> float:
        return self.shaft - self.origin


class VirtualFashionStarBus(PtyDevice):
    device_name = "virtual FashionStar bus"

    def __init__(self, ids: Iterable[int]) -> None:
        self.servos = {i: EmulatedServo(i) for i in ids}
        self.requests: list[fs.Packet] = []
        self._lock = threading.Lock()
        super().__init__()
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self._open_pty()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="virtual-fashionstar", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        os.write(self._wake_w, b"x")
        thread, self._thread = self._thread, None
        self._close_pty_after([thread], self._wake_r, self._wake_w)

    # Hands and faults

    def move(self, servo_id: int, angle_deg: float) -> None:
        """Turn a servo so that it reads `angle_deg` from its origin, as a hand would."""
        with self._lock:
            servo = self.servos[servo_id]
            servo.shaft = servo.origin + angle_deg

    def unplug(self, servo_id: int, unplugged: bool = True) -> None:
        with self._lock:
            self.servos[servo_id].unplugged = unplugged

    def drop_replies(self, servo_id: int, count: int = 1) -> None:
        with self._lock:
            self.servos[servo_id].drops += count

    def corrupt_replies(self, servo_id: int, count: int = 1) -> None:
        with self._lock:
            self.servos[servo_id].corruptions += count

    # The servos' side

    def _serve(self) -> None:
        reader = fs.PacketReader(fs.REQUEST_HEADER)
        while True:
            ready, _, _ = select.select([self._master, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                data = os.read(self._master, 4096)
            except OSError:
                return
            for packet in reader.feed(data):
                with self._lock:
                    self.requests.append(packet)
                    del self.requests[:-1000]
                    replies = self._answer(packet)
                if replies:
                    os.write(self._master, b"".join(replies))

    def _answer(self, packet: fs.Packet) -> list[bytes]:
        params = packet.params
        if packet.code == fs.SYNC_COMMAND:
            if len(params) < 3 or params[0] != fs.QUERY_MONITOR:
                return []
            ids = params[3 : 3 + params[2]]
            return [r for i in ids if (r := self._reply(i, self._monitor)) is not None]
        if not params:
            return []
        servo = self.servos.get(params[0])
        if servo is None or servo.unplugged:
            return []
        if packet.code == fs.PING:
            reply = self._reply(servo.id, lambda s: fs.answer(fs.PING, bytes([s.id])))
            return [] if reply is None else [reply]
        if packet.code == fs.SET_STOP_MODE and len(params) >= 4:
            mode, _power = struct.unpack("<BH", params[1:4])
            servo.locked = mode != fs.UNLOCKED
        elif packet.code == fs.SET_ORIGIN and len(params) == 2:
            servo.origin = servo.shaft
        elif packet.code == fs.RESET_MULTI_TURN:
            turns = round(servo.angle / 360.0)
            servo.origin += 360.0 * turns
        return []

    def _reply(self, servo_id: int, build: Callable[[EmulatedServo], bytes]) -> bytes | None:
        servo = self.servos.get(servo_id)
        if servo is None or servo.unplugged:
            return None
        if servo.drops > 0:
            servo.drops -= 1
            return None
        reply = build(servo)
        if servo.corruptions > 0:
            servo.corruptions -= 1
            reply = reply[:-1] + bytes([reply[-1] ^ 0x5A])
        return reply

    @staticmethod
    def _monitor(servo: EmulatedServo) -> bytes:
        turns = int(servo.angle // 360)
        return fs.encode_monitor(fs.Monitor(servo.id, 12000, 50, 600, 30, 0, servo.angle, turns))
