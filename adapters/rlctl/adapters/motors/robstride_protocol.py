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

CMD_ENABLE = 0xFC
CMD_DISABLE = 0xFD
CMD_SET_ZERO = 0xFE
CMD_CLEAR_FAULT = 0xFB

MODE_MIT = 0
MODE_POS_VEL = 1
MODE_VELOCITY = 2
MODE_NAMES = {MODE_MIT: "MIT", MODE_POS_VEL: "position-velocity", MODE_VELOCITY: "velocity"}

KP_RANGE = (0.0, 500.0)
KD_RANGE = (0.0, 5.0)
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


class MalformedFrame(ValueError):
    """A frame that is not what the motor should have sent (short, or another motor's)."""


def limits(model: str) -> tuple[float, float, float]:
    return MODEL_LIMITS[model.lower()]


def float_to_uint(x: float, low: float, high: float, bits: int) -> int:
    x = max(low, min(high, x))
    return int((x - low) / (high - low) * ((1 << bits) - 1))


def uint_to_float(x: int, low: float, high: float, bits: int) -> float:
    return float(x) / ((1 << bits) - 1) * (high - low) + low


def simple_command(command: int) -> bytes:
    return bytes([0xFF] * 7 + [command])


def mode_command(mode: int) -> bytes:
    return bytes([0xFF] * 6 + [mode, CMD_ENABLE])


def is_simple_command(data: bytes) -> bool:
    return len(data) == 8 and data[:7] == b"\xff" * 7


def is_mode_command(data: bytes) -> bool:
    return len(data) == 8 and data[:6] == b"\xff" * 6 and data[6] in MODE_NAMES and data[7] == 0xFC


def encode_mit(
    model: str, kp: float, kd: float, position_deg: float, velocity_dps: float, torque: float
) -> bytes:
    pmax, vmax, tmax = limits(model)
    kp_u = float_to_uint(kp, *KP_RANGE, 12)
    kd_u = float_to_uint(kd, *KD_RANGE, 12)
    q = float_to_uint(math.radians(position_deg), -pmax, pmax, 16)
    dq = float_to_uint(math.radians(velocity_dps), -vmax, vmax, 12)
    tau = float_to_uint(torque, -tmax, tmax, 12)
    return bytes(
        [
            (q >> 8) & 0xFF,
            q & 0xFF,
            dq >> 4,
            ((dq & 0xF) << 4) | ((kp_u >> 8) & 0xF),
            kp_u & 0xFF,
            kd_u >> 4,
            ((kd_u & 0xF) << 4) | ((tau >> 8) & 0xF),
            tau & 0xFF,
        ]
    )


@attrs.frozen
class MitCommand:
    kp: float
    kd: float
    position_deg: float
    velocity_dps: float
    torque: float


def decode_mit(model: str, data: bytes) -> MitCommand:
    pmax, vmax, tmax = limits(model)
    q = (data[0] << 8) | data[1]
    dq = (data[2] << 4) | (data[3] >> 4)
    kp_u = ((data[3] & 0xF) << 8) | data[4]
    kd_u = (data[5] << 4) | (data[6] >> 4)
    tau = ((data[6] & 0xF) << 8) | data[7]
    return MitCommand(
        kp=uint_to_float(kp_u, *KP_RANGE, 12),
        kd=uint_to_float(kd_u, *KD_RANGE, 12),
        position_deg=math.degrees(uint_to_float(q, -pmax, pmax, 16)),
        velocity_dps=math.degrees(uint_to_float(dq, -vmax, vmax, 12)),
        torque=uint_to_float(tau, -tmax, tmax, 12),
    )


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
    pmax, vmax, tmax = limits(model)
    q = float_to_uint(math.radians(position_deg), -pmax, pmax, 16)
    dq = float_to_uint(math.radians(velocity_dps), -vmax, vmax, 12)
    tau = float_to_uint(torque, -tmax, tmax, 12)
    temp = max(0, min(0xFFFF, round(temp_mos * 10)))
    return bytes(
        [
            recv_id & 0xFF,
            (q >> 8) & 0xFF,
            q & 0xFF,
            (dq >> 4) & 0xFF,
            ((dq & 0xF) << 4) | ((tau >> 8) & 0xF),
            tau & 0xFF,
            (temp >> 8) & 0xFF,
            temp & 0xFF,
        ]
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
    if len(data) < 8:
        raise MalformedFrame(f"a feedback frame of {len(data)} bytes (8 expected)")
    if data[0] != recv_id & 0xFF:
        raise MalformedFrame(f"a feedback frame for id 0x{data[0]:02X} (expected 0x{recv_id:02X})")
    pmax, vmax, tmax = limits(model)
    q = (data[1] << 8) | data[2]
    dq = (data[3] << 4) | (data[4] >> 4)
    tau = ((data[4] & 0xF) << 8) | data[5]
    return MotorState(
        position=math.degrees(uint_to_float(q, -pmax, pmax, 16)),
        velocity=math.degrees(uint_to_float(dq, -vmax, vmax, 12)),
        torque=uint_to_float(tau, -tmax, tmax, 12),
        temp_mos=((data[6] << 8) | data[7]) / 10,
    )
