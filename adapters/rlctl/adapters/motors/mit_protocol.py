"""The MIT-mode CAN frame Damiao and Robstride motors both speak (LeRobot 0.6.1's packing):
pure packing and unpacking, shared by `damiao_protocol` and `robstride_protocol`.

A model's scales are (PMAX rad, VMAX rad/s, TMAX N·m). An MIT command is 8 bytes: position (16
bits), velocity (12), kp (12), kd (12), torque (12); a feedback frame carries position (16 bits),
velocity (12) and torque (12) in its bytes 1 to 5, around a first byte and two temperature bytes
that each brand fills its own way. The simple commands are `FF FF FF FF FF FF FF CMD`.
"""

from __future__ import annotations

import math

import attrs

CMD_ENABLE = 0xFC
CMD_DISABLE = 0xFD
CMD_SET_ZERO = 0xFE

KP_RANGE = (0.0, 500.0)
KD_RANGE = (0.0, 5.0)

Limits = tuple[float, float, float]


class MalformedFrame(ValueError):
    """A frame that is not what the motor should have sent (short, or another motor's)."""


def float_to_uint(x: float, low: float, high: float, bits: int) -> int:
    x = min(max(x, low), high)
    return int((x - low) / (high - low) * ((1 << bits) - 1))


def uint_to_float(x: int, low: float, high: float, bits: int) -> float:
    return x / ((1 << bits) - 1) * (high - low) + low


def simple_command(command: int) -> bytes:
    return bytes([0xFF] * 7 + [command])


@attrs.frozen
class MitCommand:
    kp: float
    kd: float
    position_deg: float
    velocity_dps: float
    torque: float


def encode_mit(
    limits: Limits, kp: float, kd: float, position_deg: float, velocity_dps: float, torque: float
) -> bytes:
    pmax, vmax, tmax = limits
    q = float_to_uint(math.radians(position_deg), -pmax, pmax, 16)
    dq = float_to_uint(math.radians(velocity_dps), -vmax, vmax, 12)
    kp_u = float_to_uint(kp, *KP_RANGE, 12)
    kd_u = float_to_uint(kd, *KD_RANGE, 12)
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


def decode_mit(limits: Limits, data: bytes) -> MitCommand:
    pmax, vmax, tmax = limits
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


def encode_motion(limits: Limits, position_deg: float, velocity_dps: float, torque: float) -> bytes:
    """Bytes 1 to 5 of a feedback frame: position, velocity and torque."""
    pmax, vmax, tmax = limits
    q = float_to_uint(math.radians(position_deg), -pmax, pmax, 16)
    dq = float_to_uint(math.radians(velocity_dps), -vmax, vmax, 12)
    tau = float_to_uint(torque, -tmax, tmax, 12)
    return bytes(
        [
            (q >> 8) & 0xFF,
            q & 0xFF,
            (dq >> 4) & 0xFF,
            ((dq & 0xF) << 4) | ((tau >> 8) & 0xF),
            tau & 0xFF,
        ]
    )


def decode_motion(limits: Limits, data: bytes) -> tuple[float, float, float]:
    """(degrees, degrees per second, N·m) from a feedback frame (its bytes 1 to 5);
    `MalformedFrame` when it is short."""
    if len(data) < 8:
        raise MalformedFrame(f"a feedback frame of {len(data)} bytes (8 expected)")
    pmax, vmax, tmax = limits
    q = (data[1] << 8) | data[2]
    dq = (data[3] << 4) | (data[4] >> 4)
    tau = ((data[4] & 0xF) << 8) | data[5]
    return (
        math.degrees(uint_to_float(q, -pmax, pmax, 16)),
        math.degrees(uint_to_float(dq, -vmax, vmax, 12)),
        uint_to_float(tau, -tmax, tmax, 12),
    )
