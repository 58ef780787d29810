"""Damiao motors emulated on a python-can bus: a thread that answers as the motors do.

    with VirtualDamiaoMotors("rig", {1: (0x11, "dm8009"), 2: (0x12, "dm4310")}) as motors:
        bus = DamiaoMotorBus("rig", {...}, interface="virtual")

Each motor keeps an enabled flag, a position (where an MIT command sends it when enabled, or
where a test puts it as a hand would), a zero set by `CMD_SET_ZERO`, and its parameters (control
mode, PMAX/VMAX/TMAX, ids; a write of the control mode switches it). Position-velocity and
force-position commands move it in those modes. Faults are injected per motor: `silence(id)`
(it stops answering), `corrupt(id)` (its answers are short frames), `fault(id, code)` (its
status nibble reports a fault, as an over-current or an overload does). Used by tests and by a
person trying rlctl with no arm (`interface="virtual"` on both sides).
"""

from __future__ import annotations

from collections import deque

import attrs

from rlctl.adapters.motors import damiao_protocol as dm
from rlctl.adapters.motors.virtual_can_motor import VirtualCanMotors


@attrs.define
class EmulatedMotor:
    send_id: int
    recv_id: int
    model: str
    position: float = 0.0  # degrees from the motor's zero
    velocity: float = 0.0
    torque: float = 0.0
    enabled: bool = False
    status_fault: int | None = None
    silent: bool = False
    corrupt: bool = False
    control_mode: int = dm.MIT_MODE
    locked_mode: bool = False  # refuses mode writes (a test's fault: old firmware)
    # The latest MIT commands received, newest last (bounded: an emulator may run for hours).
    commands: deque[dm.MitCommand] = attrs.field(factory=lambda: deque(maxlen=1000))
    # The latest position-velocity and force-position commands: (mode, the decoded fields).
    mode_commands: deque[tuple[int, tuple[float, ...]]] = attrs.field(
        factory=lambda: deque(maxlen=1000)
    )
    params: dict[int, float | int] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        pmax, vmax, tmax = dm.MODEL_LIMITS[self.model]
        self.params.update(
            {
                dm.PARAMS["PMAX"]: pmax,
                dm.PARAMS["VMAX"]: vmax,
                dm.PARAMS["TMAX"]: tmax,
                dm.PARAMS["MST_ID"]: self.recv_id,
                dm.PARAMS["ESC_ID"]: self.send_id,
                dm.PARAMS["TIMEOUT"]: 0,
                dm.PARAMS["can_br"]: 4,  # 1 Mbps
            }
        )

    @property
    def status(self) -> int:
        if self.status_fault is not None:
            return self.status_fault
        return dm.STATE_ENABLED if self.enabled else dm.STATE_DISABLED

    def feedback(self) -> bytes:
        frame = dm.encode_feedback(
            self.model, self.send_id, self.status, self.position, self.velocity, self.torque
        )
        return frame[:5] if self.corrupt else frame


class VirtualDamiaoMotors(VirtualCanMotors[EmulatedMotor]):
    thread_name = "virtual-damiao"
    answers_fd = True

    def _new_motor(self, send_id: int, recv_id: int, model: str) -> EmulatedMotor:
        return EmulatedMotor(send_id, recv_id, model)

    # Faults

    def fault(self, send_id: int, code: int | None) -> None:
        with self._lock:
            self.motors[send_id].status_fault = code

    # The motors' side of the protocol

    def _answer(self, arbitration_id: int, data: bytes) -> list[tuple[int, bytes]]:
        if arbitration_id == dm.PARAM_ID:
            return self._answer_param(data)
        for mode, offset in dm.MODE_OFFSETS.items():
            motor = self.motors.get(arbitration_id - offset)
            if arbitration_id > offset and motor is not None:
                return self._answer_mode(motor, mode, data)
        motor = self.motors.get(arbitration_id)
        if motor is None or motor.silent or len(data) != 8:
            return []
        if data[:7] == b"\xff" * 7 and data[7] in (dm.CMD_ENABLE, dm.CMD_DISABLE, dm.CMD_SET_ZERO):
            if data[7] == dm.CMD_ENABLE:
                motor.enabled = True
                if motor.status_fault == dm.STATE_TIMED_OUT:
                    motor.status_fault = None  # enabling arms it again
            elif data[7] == dm.CMD_DISABLE:
                motor.enabled = False
            else:
                motor.position = 0.0
            return [(motor.recv_id, motor.feedback())]
        command = dm.decode_mit(motor.model, data)
        motor.commands.append(command)
        if motor.enabled and motor.status_fault is None and motor.control_mode == dm.MIT_MODE:
            motor.position = command.position_deg
        return [(motor.recv_id, motor.feedback())]

    def _answer_mode(self, motor: EmulatedMotor, mode: int, data: bytes) -> list[tuple[int, bytes]]:
        """A position-velocity or force-position command: followed only in that mode."""
        if motor.silent or len(data) != 8:
            return []
        fields = dm.decode_pos_vel(data) if mode == dm.POS_VEL_MODE else dm.decode_force_pos(data)
        motor.mode_commands.append((mode, fields))
        if motor.enabled and motor.status_fault is None and motor.control_mode == mode:
            motor.position = fields[0]
        return [(motor.recv_id, motor.feedback())]

    def _answer_param(self, data: bytes) -> list[tuple[int, bytes]]:
        if len(data) < 4:
            return []
        motor = self.motors.get(data[0] | (data[1] << 8))
        if motor is None or motor.silent:
            return []
        if data[2] == dm.CMD_REFRESH:
            return [(motor.recv_id, motor.feedback())]
        if data[2] == dm.CMD_READ_PARAM:
            rid = data[3]
            if rid == dm.PARAMS["CTRL_MODE"]:
                value: float | int = motor.control_mode
            elif rid in motor.params:
                value = motor.params[rid]
            else:
                return []
            reply = dm.param_reply(motor.send_id, rid, value)
            return [(motor.recv_id, reply[:5] if motor.corrupt else reply)]
        if data[2] == dm.CMD_WRITE_PARAM and len(data) == 8:
            rid = data[3]
            value = dm.decode_param(rid, data[4:8])
            if rid == dm.PARAMS["CTRL_MODE"]:
                if int(value) not in dm.CONTROL_MODES or motor.locked_mode:
                    return []
                motor.control_mode = int(value)
            else:
                motor.params[rid] = value
            return [(motor.recv_id, data[:8])]  # the motor echoes the write
        return []
