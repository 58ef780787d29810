"""Robstride motors emulated on a python-can bus: a thread that answers as the motors do in MIT
mode (and velocity mode), frame for frame as `robstride_protocol` describes them.

    with VirtualRobstrideMotors("rig", {1: (1, "o2"), 2: (2, "o0")}) as motors:
        bus = RobstrideMotorBus("rig", {...}, interface="virtual")

Each motor keeps an enabled flag, a control mode, a position (where an MIT command sends it when
enabled, or where a test puts it as a hand would) and a zero. Faults are injected per motor:
`silence(id)` (it stops answering), `corrupt(id)` (its answers are short frames),
`fault(id, bits)` (it answers state queries with a fault frame).
"""

from __future__ import annotations

from collections import deque

import attrs

from rlctl.adapters.motors import robstride_protocol as rs
from rlctl.adapters.motors.virtual_can_motor import VirtualCanMotors


@attrs.define
class EmulatedRobstride:
    send_id: int
    recv_id: int
    model: str
    position: float = 0.0  # degrees from the motor's zero
    velocity: float = 0.0  # degrees per second
    torque: float = 0.0
    temp_mos: float = 31.5
    enabled: bool = False
    mode: int = rs.MODE_MIT
    fault_bits: int = 0
    silent: bool = False
    corrupt: bool = False
    # The latest commands received, newest last (bounded: an emulator may run for hours).
    commands: deque[rs.MitCommand] = attrs.field(factory=lambda: deque(maxlen=1000))
    velocity_commands: deque[tuple[float, float]] = attrs.field(factory=lambda: deque(maxlen=1000))
    frames: deque[bytes] = attrs.field(factory=lambda: deque(maxlen=1000))

    def feedback(self) -> bytes:
        frame = rs.encode_feedback(
            self.model, self.recv_id, self.position, self.velocity, self.torque, self.temp_mos
        )
        return frame[:5] if self.corrupt else frame


class VirtualRobstrideMotors(VirtualCanMotors[EmulatedRobstride]):
    thread_name = "virtual-robstride"

    def _new_motor(self, send_id: int, recv_id: int, model: str) -> EmulatedRobstride:
        return EmulatedRobstride(send_id, recv_id, model)

    # Faults

    def fault(self, send_id: int, bits: int) -> None:
        with self._lock:
            self.motors[send_id].fault_bits = bits

    # The motors' side of the protocol

    def _answer(self, arbitration_id: int, data: bytes) -> list[tuple[int, bytes]]:
        reply = self._reply(arbitration_id, data)
        # Robstride firmware answers on the host's id; LeRobot reads the first byte.
        return [] if reply is None else [(0xFD, reply)]

    def _reply(self, arbitration_id: int, data: bytes) -> bytes | None:
        motor = self.motors.get(arbitration_id)
        if motor is None or len(data) != 8:
            return None
        motor.frames.append(data)
        if motor.silent:
            return None
        if rs.is_simple_command(data):
            command = data[7]
            if command == rs.CMD_CLEAR_FAULT and motor.fault_bits:
                return rs.fault_frame(motor.recv_id, motor.fault_bits)
            if command == rs.CMD_ENABLE:
                motor.enabled = True
            elif command == rs.CMD_DISABLE:
                motor.enabled = False
                motor.velocity = 0.0
            elif command == rs.CMD_SET_ZERO:
                motor.position = 0.0
            return motor.feedback()
        if rs.is_mode_command(data):
            motor.mode = data[6]
            return motor.feedback()
        if motor.mode == rs.MODE_VELOCITY:
            velocity, current = rs.decode_velocity(data)
            motor.velocity_commands.append((velocity, current))
            if motor.enabled and not motor.fault_bits:
                motor.velocity = velocity
            return motor.feedback()
        command_mit = rs.decode_mit(motor.model, data)
        motor.commands.append(command_mit)
        if motor.enabled and not motor.fault_bits and motor.mode == rs.MODE_MIT:
            motor.position = command_mit.position_deg
        return motor.feedback()
