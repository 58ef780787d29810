"""Robstride motors' CAN protocol in MIT mode, as LeRobot 0.6.1's `RobstrideMotorsBus` speaks it:
pure packing and unpacking, shared by the bus and its emulator.

Frames are 8 bytes (classic CAN, never FD), standard 11-bit ids, sent to the motor's id:

- enable / disable / set zero / clear fault: `FF FF FF FF FF FF FF FC|FD|FE|FB`; clearing faults
  is also how LeRobot asks a motor for its state (it moves nothing);
- switch control mode: `FF FF FF FF FF FF MODE FC` (0 MIT, 1 position-velocity, 2 velocity);
- MIT control: position (16 bits), velocity (12), kp (12), kd (12), torque (12), as Damiao's;
- velocity control (velocity mode): speed in rad/s and a current limit in A, two float32 LE.

A motor answers with a feedback frame whose *first byte* names it (its receive id, by default
its id): position (16 bits), velocity (12), torque (12), MOS temperature in 0.1 °C (16 bits,
big-endian). A motor with a latched fault answers a state query with a fault frame instead:
its id, 32 fault bits (little-endian), then three zero bytes.
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

CMD_CLEAR_FAULT = 0xFB

MODE_MIT = 0
MODE_POS_VEL = 1
MODE_VELOCITY = 2
MODE_NAMES = {MODE_MIT: "MIT", MODE_POS_VEL: "position-velocity", MODE_VELOCITY: "velocity"}

# The current limit LeRobot sends with every velocity command.
VELOCITY_CURRENT_LIMIT_A = 5.0

# Model -> (PMAX rad, VMAX rad/s, TMAX N·m): the scales of the MIT frames (LeRobot's table).
MODEL_LIMITS: dict[str, tuple[float, float, float]] = {
    "o0": (12.57, 33, 14),
    "o1": (12.57, 44, 17),
    "o2": (12.57, 33, 20),
    "o3": (12.57, 33, 60),
    "o4": (12.57, 33, 120),
    "o5": (12.57, 50, 5.5),
    "elo5": (12.57, 50, 6),
    "o6": (112.5, 50, 36),
}


def limits(model: str) -> tuple[float, float, float]:
    return MODEL_LIMITS[model.lower()]


def mode_command(mode: int) -> bytes:
    return bytes([0xFF] * 6 + [mode, CMD_ENABLE])


def is_simple_command(data: bytes) -> bool:
    return len(data) == 8 and data[:7] == b"\xff" * 7


def is_mode_command(data: bytes) -> bool:
    return len(data) == 8 and data[:6] == b"\xff" * 6 and data[6] in MODE_NAMES and data[7] == 0xFC


def encode_mit(
    model: str, kp: float, kd: float, position_deg: float, velocity_dps: float, torque: float
) -> bytes:
    return mit.encode_mit(limits(model), kp, kd, position_deg, velocity_dps, torque)


def decode_mit(model: str, data: bytes) -> MitCommand:
    return mit.decode_mit(limits(model), data)


def encode_velocity(
    velocity_dps: float, current_limit_a: float = VELOCITY_CURRENT_LIMIT_A
) -> bytes:
    """LeRobot rounds both to float32 (numpy's), which is what struct's "<f" does too."""
    return struct.pack("<ff", math.radians(velocity_dps), current_limit_a)


def decode_velocity(data: bytes) -> tuple[float, float]:
    """(degrees per second, current limit in A)."""
    speed, current = struct.unpack("<ff", data[:8])
    return math.degrees(speed), current


@attrs.frozen
class MotorState:
    """A feedback frame, decoded: degrees, degrees per second, N·m, °C."""

    position: float
    velocity: float
    torque: float
    temp_mos: float


def encode_feedback(
    model: str,
    recv_id: int,
    position_deg: float,
    velocity_dps: float,
    torque: float,
    temp_mos: float = 30.0,
) -> bytes:
    temp = max(0, min(0xFFFF, round(temp_mos * 10)))
    return (
        bytes([recv_id & 0xFF])
        + mit.encode_motion(limits(model), position_deg, velocity_dps, torque)
        + bytes([(temp >> 8) & 0xFF, temp & 0xFF])
    )


def fault_frame(recv_id: int, fault_bits: int) -> bytes:
    return bytes([recv_id & 0xFF]) + struct.pack("<I", fault_bits) + b"\x00\x00\x00"


def fault_bits(data: bytes) -> int | None:
    """The fault bits of a fault frame (LeRobot's test: nonzero bits, three zero bytes after);
    None for any other frame."""
    if len(data) < 8:
        return None
    bits = int.from_bytes(data[1:5], "little")
    return bits if bits and data[5] == data[6] == data[7] == 0 else None


def decode_feedback(model: str, recv_id: int, data: bytes) -> MotorState:
    """The state in a feedback frame from the motor answering as `recv_id`; `MalformedFrame`
    when it is short or names another motor."""
    position, velocity, torque = mit.decode_motion(limits(model), data)
    if data[0] != recv_id & 0xFF:
        raise MalformedFrame(f"a feedback frame for id 0x{data[0]:02X} (expected 0x{recv_id:02X})")
    return MotorState(
        position=position,
        velocity=velocity,
        torque=torque,
        temp_mos=((data[6] << 8) | data[7]) / 10,
    )
