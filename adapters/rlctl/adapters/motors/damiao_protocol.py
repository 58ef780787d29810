"""Damiao motors' CAN protocol, as LeRobot 0.6.1's `DamiaoMotorsBus` speaks it (and Damiao's
manual documents it): pure packing and unpacking, shared by the bus and its emulator.

Frames are 8 bytes, standard 11-bit ids. A motor listens on its *send* id (`ESC_ID`, 0x01 for an
OpenArm's joint_1) and answers on its *receive* id (`MST_ID`, 0x11):

- enable / disable / set zero: `FF FF FF FF FF FF FF FC|FD|FE` to the send id;
- MIT control: position (16 bits), velocity (12), kp (12), kd (12), torque (12) to the send id;
- refresh (a state query that moves nothing): `id_lo id_hi CC 00 00 00 00 00` to 0x7FF;
- parameter read: `id_lo id_hi 33 RID 00 00 00 00` to 0x7FF, answered `id_lo id_hi 33 RID v0..v3`.

Every command but a parameter read is answered with a feedback frame: `ERR<<4 | id`, position
(16 bits), velocity (12), torque (12), MOS and rotor temperatures. Positions cross the wire in
radians scaled to the motor model's [-PMAX, PMAX]; the bus speaks degrees, as LeRobot's does.
"""

from __future__ import annotations

import math
import struct

import attrs

from rlctl.adapters.motors import mit_protocol as mit
from rlctl.adapters.motors.mit_protocol import CMD_DISABLE as CMD_DISABLE
from rlctl.adapters.motors.mit_protocol import CMD_ENABLE as CMD_ENABLE
from rlctl.adapters.motors.mit_protocol import CMD_SET_ZERO as CMD_SET_ZERO
from rlctl.adapters.motors.mit_protocol import KD_RANGE as KD_RANGE
from rlctl.adapters.motors.mit_protocol import KP_RANGE as KP_RANGE
from rlctl.adapters.motors.mit_protocol import MalformedFrame as MalformedFrame
from rlctl.adapters.motors.mit_protocol import MitCommand as MitCommand
from rlctl.adapters.motors.mit_protocol import float_to_uint as float_to_uint
from rlctl.adapters.motors.mit_protocol import simple_command as simple_command
from rlctl.adapters.motors.mit_protocol import uint_to_float as uint_to_float

CMD_REFRESH = 0xCC
CMD_READ_PARAM = 0x33
CMD_WRITE_PARAM = 0x55
PARAM_ID = 0x7FF  # where refreshes and parameter reads are sent

# Model -> (PMAX rad, VMAX rad/s, TMAX N·m): the scales of the MIT frames (LeRobot's table).
MODEL_LIMITS: dict[str, tuple[float, float, float]] = {
    "dm3507": (12.5, 30, 10),
    "dm4310": (12.5, 30, 10),
    "dm4310_48v": (12.5, 50, 10),
    "dm4340": (12.5, 8, 28),
    "dm4340_48v": (12.5, 10, 28),
    "dm6006": (12.5, 45, 20),
    "dm8006": (12.5, 45, 40),
    "dm8009": (12.5, 45, 54),
    "dm10010l": (12.5, 25, 200),
    "dm10010": (12.5, 20, 200),
    "dmh3510": (12.5, 280, 1),
    "dmh6215": (12.5, 45, 10),
    "dmg6220": (12.5, 45, 10),
}

# Motor parameters (RID) readable with 0x33, by LeRobot's `MotorVariable` names.
PARAMS: dict[str, int] = {
    "UV_Value": 0,
    "KT_Value": 1,
    "OT_Value": 2,
    "OC_Value": 3,
    "ACC": 4,
    "DEC": 5,
    "MAX_SPD": 6,
    "MST_ID": 7,
    "ESC_ID": 8,
    "TIMEOUT": 9,
    "CTRL_MODE": 10,
    "Damp": 11,
    "Inertia": 12,
    "hw_ver": 13,
    "sw_ver": 14,
    "SN": 15,
    "NPP": 16,
    "Rs": 17,
    "LS": 18,
    "Flux": 19,
    "Gr": 20,
    "PMAX": 21,
    "VMAX": 22,
    "TMAX": 23,
    "I_BW": 24,
    "KP_ASR": 25,
    "KI_ASR": 26,
    "KP_APR": 27,
    "KI_APR": 28,
    "OV_Value": 29,
    "GREF": 30,
    "Deta": 31,
    "V_BW": 32,
    "IQ_c1": 33,
    "VL_c1": 34,
    "can_br": 35,
    "sub_ver": 36,
}
# Parameters held as unsigned integers; the others are IEEE floats, both little-endian.
INTEGER_PARAMS = frozenset({7, 8, 9, 10, 13, 14, 15, 16, 35, 36})
CONTROL_MODES = {1: "MIT", 2: "position-velocity", 3: "velocity", 4: "torque-position"}
MIT_MODE = 1

# The high nibble of a feedback frame's first byte.
STATE_DISABLED = 0x0
STATE_ENABLED = 0x1
STATE_TIMED_OUT = 0xD  # no frame within the motor's CAN timeout: it disabled itself
FAULTS: dict[int, str] = {
    0x8: "over-voltage",
    0x9: "under-voltage",
    0xA: "over-current",
    0xB: "MOS over-temperature",
    0xC: "rotor over-temperature",
    0xD: "lost communication (its CAN timeout ran out)",
    0xE: "overload",
}


def param_request(motor_id: int, command: int, rid: int = 0) -> bytes:
    """A refresh (`CMD_REFRESH`) or parameter read (`CMD_READ_PARAM`), sent to `PARAM_ID`."""
    return bytes([motor_id & 0xFF, (motor_id >> 8) & 0xFF, command, rid, 0, 0, 0, 0])


def max_position_deg(model: str) -> float:
    """The largest goal, in degrees, an MIT frame of `model` carries (its PMAX)."""
    return math.degrees(MODEL_LIMITS[model][0])


def encode_mit(
    model: str, kp: float, kd: float, position_deg: float, velocity_dps: float, torque: float
) -> bytes:
    return mit.encode_mit(MODEL_LIMITS[model], kp, kd, position_deg, velocity_dps, torque)


def decode_mit(model: str, data: bytes) -> MitCommand:
    return mit.decode_mit(MODEL_LIMITS[model], data)


@attrs.frozen
class MotorState:
    """A feedback frame, decoded: degrees, degrees per second, N·m, °C."""

    position: float
    velocity: float
    torque: float
    temp_mos: float
    temp_rotor: float
    status: int  # the high nibble: STATE_DISABLED, STATE_ENABLED or a FAULTS code

    @property
    def fault(self) -> str | None:
        if self.status in (STATE_DISABLED, STATE_ENABLED):
            return None
        return FAULTS.get(self.status, f"fault code 0x{self.status:X}")


def encode_feedback(
    model: str,
    motor_id: int,
    status: int,
    position_deg: float,
    velocity_dps: float,
    torque: float,
    temp_mos: int = 30,
    temp_rotor: int = 30,
) -> bytes:
    return (
        bytes([((status & 0xF) << 4) | (motor_id & 0xF)])
        + mit.encode_motion(MODEL_LIMITS[model], position_deg, velocity_dps, torque)
        + bytes([temp_mos & 0xFF, temp_rotor & 0xFF])
    )


def decode_feedback(model: str, motor_id: int, data: bytes) -> MotorState:
    """The state in a feedback frame from the motor at send id `motor_id`; `MalformedFrame` when
    it is short or names another motor (the low nibble of its first byte is the id's)."""
    position, velocity, torque = mit.decode_motion(MODEL_LIMITS[model], data)
    if data[0] & 0xF != motor_id & 0xF:
        raise MalformedFrame(
            f"a feedback frame for id 0x{data[0] & 0xF:X} (expected 0x{motor_id & 0xF:X})"
        )
    return MotorState(
        position=position,
        velocity=velocity,
        torque=torque,
        temp_mos=float(data[6]),
        temp_rotor=float(data[7]),
        status=data[0] >> 4,
    )


def encode_param(rid: int, value: float | int) -> bytes:
    if rid in INTEGER_PARAMS:
        return struct.pack("<I", int(value))
    return struct.pack("<f", float(value))


def decode_param(rid: int, raw: bytes) -> float | int:
    if rid in INTEGER_PARAMS:
        return int(struct.unpack("<I", raw[:4])[0])
    return float(struct.unpack("<f", raw[:4])[0])


def param_reply(motor_id: int, rid: int, value: float | int) -> bytes:
    return bytes([motor_id & 0xFF, (motor_id >> 8) & 0xFF, CMD_READ_PARAM, rid]) + encode_param(
        rid, value
    )


def is_param_reply(data: bytes, motor_id: int, rid: int) -> bool:
    return (
        len(data) >= 8
        and data[0] == motor_id & 0xFF
        and data[1] == (motor_id >> 8) & 0xFF
        and data[2] == CMD_READ_PARAM
        and data[3] == rid
    )


# The other control modes (Damiao's manual; motorbridge drives the reBot B601 with them). Each
# listens on its own arbitration id, the motor's send id plus an offset, and is answered with a
# feedback frame like an MIT command:
# - position-velocity (mode 2): position (rad, float32) and velocity limit (rad/s, float32);
# - force-position (mode 4): position (rad, float32), velocity limit (rad/s times 100, uint16) and
#   current limit (a ratio of the maximum times 10000, uint16).
POS_VEL_MODE = 2
FORCE_POS_MODE = 4
MODE_OFFSETS = {POS_VEL_MODE: 0x100, FORCE_POS_MODE: 0x300}


def encode_pos_vel(position_deg: float, velocity_limit_dps: float) -> bytes:
    return struct.pack(
        "<ff", math.radians(position_deg), math.radians(max(0.0, velocity_limit_dps))
    )


def decode_pos_vel(data: bytes) -> tuple[float, float]:
    """(position in degrees, velocity limit in degrees per second)."""
    if len(data) < 8:
        raise MalformedFrame(f"a {len(data)}-byte position-velocity frame")
    position, velocity = struct.unpack("<ff", data[:8])
    return math.degrees(position), math.degrees(velocity)


def encode_force_pos(position_deg: float, velocity_limit_dps: float, torque_ratio: float) -> bytes:
    velocity = int(min(max(math.radians(velocity_limit_dps), 0.0), 100.0) * 100)
    current = int(min(max(torque_ratio, 0.0), 1.0) * 10_000)
    return struct.pack(
        "<fHH", math.radians(position_deg), min(velocity, 10_000), min(current, 10_000)
    )


def decode_force_pos(data: bytes) -> tuple[float, float, float]:
    """(position in degrees, velocity limit in degrees per second, torque ratio)."""
    if len(data) < 8:
        raise MalformedFrame(f"a {len(data)}-byte force-position frame")
    position, velocity, current = struct.unpack("<fHH", data[:8])
    return math.degrees(position), math.degrees(velocity / 100), current / 10_000


def param_write(motor_id: int, rid: int, value: float | int) -> bytes:
    """A parameter write (`CMD_WRITE_PARAM`), sent to `PARAM_ID`; answered as a read is."""
    return bytes([motor_id & 0xFF, (motor_id >> 8) & 0xFF, CMD_WRITE_PARAM, rid]) + encode_param(
        rid, value
    )
