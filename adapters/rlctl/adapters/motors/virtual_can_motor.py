"""What the emulated CAN motors (`VirtualDamiaoMotors`, `VirtualRobstrideMotors`) share: a thread
that reads each frame off a python-can bus, hands it to the brand's `_answer` under a lock, and
sends the answers back; starting and stopping it, and the faults and hands every emulated motor
takes (`silence`, `corrupt`, `move`). Each brand adds its motors' side of the protocol.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self


class EmulatedCanMotor(Protocol):
    """What the shared faults and hands change on an emulated motor."""

    position: float
    silent: bool
    corrupt: bool


class VirtualCanMotors[MotorT: EmulatedCanMotor]:
    thread_name: ClassVar[str]  # "virtual-damiao"
    # Whether an answer is sent as CAN FD when the frame it answers was (else classic CAN).
    answers_fd: ClassVar[bool] = False

    def __init__(
        self,
        channel: str,
        motors: Mapping[int, tuple[int, str]],
        *,
        interface: str = "virtual",
    ) -> None:
        """`motors`: send id -> (receive id, model)."""
        self.channel = channel
        self.motors = {
            send: self._new_motor(send, recv, model) for send, (recv, model) in motors.items()
        }
        self._interface = interface
        self._bus: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _new_motor(self, send_id: int, recv_id: int, model: str) -> MotorT:
        raise NotImplementedError

    # Life cycle

    def start(self) -> Self:
        import can

        self._bus = can.Bus(interface=self._interface, channel=self.channel)
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._bus is not None:
            self._bus.shutdown()
            self._bus = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    # Faults and hands

    def silence(self, send_id: int, silent: bool = True) -> None:
        with self._lock:
            self.motors[send_id].silent = silent

    def corrupt(self, send_id: int, corrupt: bool = True) -> None:
        with self._lock:
            self.motors[send_id].corrupt = corrupt

    def move(self, send_id: int, position_deg: float) -> None:
        """Put a joint somewhere, as a hand moving a disabled motor would."""
        with self._lock:
            self.motors[send_id].position = position_deg

    # The motors' side of the protocol

    def _serve(self) -> None:
        import can

        while not self._stop.is_set():
            msg = self._bus.recv(timeout=0.02)
            if msg is None or msg.is_extended_id:
                continue
            with self._lock:
                replies = self._answer(msg.arbitration_id, bytes(msg.data))
            for arbitration_id, data in replies:
                self._bus.send(
                    can.Message(
                        arbitration_id=arbitration_id,
                        data=data,
                        is_extended_id=False,
                        is_fd=self.answers_fd and msg.is_fd,
                    )
                )

    def _answer(self, arbitration_id: int, data: bytes) -> list[tuple[int, bytes]]:
        """The answers (arbitration id, data) to one frame; called with the lock held."""
        raise NotImplementedError
