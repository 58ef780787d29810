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

from collections.abc import Sequence

from rlctl.adapters.teleop.homunculus import ARM_FIELD_OF_JOINT, ARM_FIELDS, GLOVE_JOINTS
from rlctl.adapters.teleop.virtual_line_board import VirtualLineBoard


class VirtualHomunculusBoard(VirtualLineBoard):
    device_name = "virtual Homunculus board"
    thread_name = "homunculus board"

    def __init__(
        self, fields: int, joints: dict[str, int], *, period_s: float = 0.005, start: int = 2048
    ) -> None:
        """`joints`: joint name -> its field in the line; the other fields read `start` too."""
        super().__init__(period_s=period_s)
        self._joints = dict(joints)
        self._values = [start] * fields

    @classmethod
    def glove(cls, **kwargs: float) -> VirtualHomunculusBoard:
        return cls(len(GLOVE_JOINTS), {j: i for i, j in enumerate(GLOVE_JOINTS)}, **kwargs)  # type: ignore[arg-type]

    @classmethod
    def arm(cls, **kwargs: float) -> VirtualHomunculusBoard:
        return cls(ARM_FIELDS, dict(ARM_FIELD_OF_JOINT), **kwargs)  # type: ignore[arg-type]

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

    def _next_values(self) -> list[int]:
        return self._values
