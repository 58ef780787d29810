"""The Unitree G1's 29 joints: LeRobot 0.6.1's names and order, their limits, default gains, and
the checks on a `unitree_g1` config. No ZeroMQ here: the config imports it.

Joint order and names are LeRobot's `G1_29_JointIndex` (the motor index in Unitree's low-level
messages); features are `<name>.q` as LeRobot's `UnitreeG1` declares them. The limits (radians)
are those of Unitree's own model of the 29-joint G1, `robots/g1_description/g1_29dof.urdf` in
github.com/unitreerobotics/unitree_ros (LeRobot 0.6.1 has none of its own).
"""

from __future__ import annotations

import math
from typing import Any

from rlctl.domain.errors import ConfigError
from rlctl.domain.network_address import check_host, check_port

# (LeRobot's name, Unitree's URDF joint, lower, upper) in motor-index order.
JOINTS: tuple[tuple[str, str, float, float], ...] = (
    ("kLeftHipPitch", "left_hip_pitch_joint", -2.5307, 2.8798),
    ("kLeftHipRoll", "left_hip_roll_joint", -0.5236, 2.9671),
    ("kLeftHipYaw", "left_hip_yaw_joint", -2.7576, 2.7576),
    ("kLeftKnee", "left_knee_joint", -0.087267, 2.8798),
    ("kLeftAnklePitch", "left_ankle_pitch_joint", -0.87267, 0.5236),
    ("kLeftAnkleRoll", "left_ankle_roll_joint", -0.2618, 0.2618),
    ("kRightHipPitch", "right_hip_pitch_joint", -2.5307, 2.8798),
    ("kRightHipRoll", "right_hip_roll_joint", -2.9671, 0.5236),
    ("kRightHipYaw", "right_hip_yaw_joint", -2.7576, 2.7576),
    ("kRightKnee", "right_knee_joint", -0.087267, 2.8798),
    ("kRightAnklePitch", "right_ankle_pitch_joint", -0.87267, 0.5236),
    ("kRightAnkleRoll", "right_ankle_roll_joint", -0.2618, 0.2618),
    ("kWaistYaw", "waist_yaw_joint", -2.618, 2.618),
    ("kWaistRoll", "waist_roll_joint", -0.52, 0.52),
    ("kWaistPitch", "waist_pitch_joint", -0.52, 0.52),
    ("kLeftShoulderPitch", "left_shoulder_pitch_joint", -3.0892, 2.6704),
    ("kLeftShoulderRoll", "left_shoulder_roll_joint", -1.5882, 2.2515),
    ("kLeftShoulderYaw", "left_shoulder_yaw_joint", -2.618, 2.618),
    ("kLeftElbow", "left_elbow_joint", -1.0472, 2.0944),
    ("kLeftWristRoll", "left_wrist_roll_joint", -1.972222054, 1.972222054),
    ("kLeftWristPitch", "left_wrist_pitch_joint", -1.614429558, 1.614429558),
    ("kLeftWristYaw", "left_wrist_yaw_joint", -1.614429558, 1.614429558),
    ("kRightShoulderPitch", "right_shoulder_pitch_joint", -3.0892, 2.6704),
    ("kRightShoulderRoll", "right_shoulder_roll_joint", -2.2515, 1.5882),
    ("kRightShoulderYaw", "right_shoulder_yaw_joint", -2.618, 2.618),
    ("kRightElbow", "right_elbow_joint", -1.0472, 2.0944),
    ("kRightWristRoll", "right_wrist_roll_joint", -1.972222054, 1.972222054),
    ("kRightWristPitch", "right_wrist_pitch_joint", -1.614429558, 1.614429558),
    ("kRightWristYaw", "right_wrist_yaw_joint", -1.614429558, 1.614429558),
)
NUM_JOINTS = len(JOINTS)
JOINT_NAMES = tuple(name for name, *_ in JOINTS)
# The dataset's names for the state and the action, as LeRobot's features.
FEATURE_NAMES = tuple(f"{name}.q" for name in JOINT_NAMES)
LOWER = tuple(low for *_, low, _ in JOINTS)
UPPER = tuple(high for *_, high in JOINTS)

# LeRobot's default gains, per body part in joint order.
_GAINS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "left_leg": ((150, 150, 150, 300, 40, 40), (2, 2, 2, 4, 2, 2)),
    "right_leg": ((150, 150, 150, 300, 40, 40), (2, 2, 2, 4, 2, 2)),
    "waist": ((250, 250, 250), (5, 5, 5)),
    "left_arm": ((50, 50, 80, 80), (3, 3, 3, 3)),
    "left_wrist": ((40, 40, 40), (1.5, 1.5, 1.5)),
    "right_arm": ((50, 50, 80, 80), (3, 3, 3, 3)),
    "right_wrist": ((40, 40, 40), (1.5, 1.5, 1.5)),
}

LEROBOT_BRIDGE = "python -m lerobot.robots.unitree_g1.run_g1_server"
# LeRobot's locomotion controllers (`--robot.controller`), by the class names it takes.
CONTROLLERS = ("GrootLocomotionController", "HolosomaLocomotionController")


def default_gains(which: str) -> list[float]:
    """LeRobot's default `kp` or `kd`, one per joint."""
    index = 0 if which == "kp" else 1
    return [float(v) for gains in _GAINS.values() for v in gains[index]]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _per_joint(config: Any, field: str) -> list[float]:
    values = list(getattr(config, field))
    if len(values) != NUM_JOINTS:
        raise ConfigError(
            f"{field} has {len(values)} values, the G1 has {NUM_JOINTS} joints",
            where=f"robot.{field}",
            hint="give one value per joint, in LeRobot's order (" + ", ".join(JOINT_NAMES) + ")",
        )
    bad = [JOINT_NAMES[i] for i, v in enumerate(values) if not _finite(v)]
    if bad:
        raise ConfigError(
            f"{field} is not a finite number for {', '.join(bad)}", where=f"robot.{field}"
        )
    return [float(v) for v in values]


def check_config(config: Any) -> None:
    """Refuse what rlctl cannot do honestly, and settings no robot could take."""
    if config.is_simulation:
        raise ConfigError(
            "is_simulation=true asks for LeRobot's MuJoCo simulation of the G1 (the "
            "`lerobot/unitree-g1-mujoco` environment from the Hub run through Unitree's SDK), "
            "which rlctl does not offer",
            where="robot.is_simulation",
            hint="drive the real robot through its bridge: --robot.is_simulation=false "
            f"--robot.robot_ip=<the G1's address>, with `{LEROBOT_BRIDGE}` running on the robot",
        )
    if config.controller is not None and config.controller not in CONTROLLERS:
        raise ConfigError(
            f"controller={config.controller!r} is not one of LeRobot's locomotion controllers",
            where="robot.controller",
            hint=f"one of {', '.join(CONTROLLERS)}, or unset (rlctl commands all 29 joints)",
        )
    check_host(
        config.robot_ip, where="robot.robot_ip", what="the robot",
        example="192.168.123.164 (the G1's address, LeRobot's default)",
        port_setting="robot.lowcmd_port and robot.lowstate_port",
    )  # fmt: skip
    for field in ("lowcmd_port", "lowstate_port"):
        check_port(getattr(config, field), where=f"robot.{field}")
    if config.lowcmd_port == config.lowstate_port:
        raise ConfigError(
            f"lowcmd_port and lowstate_port are both {config.lowcmd_port}",
            where="robot.lowcmd_port",
            hint="the bridge takes commands on 6000 and sends the state on 6001",
        )
    for field in ("kp", "kd"):
        values = _per_joint(config, field)
        negative = [JOINT_NAMES[i] for i, v in enumerate(values) if v < 0]
        if negative:
            raise ConfigError(
                f"{field} is negative for {', '.join(negative)}",
                where=f"robot.{field}",
                hint="gains are >= 0 (LeRobot's defaults are the G1's)",
            )
    positions = _per_joint(config, "default_positions")
    outside = [JOINT_NAMES[i] for i, v in enumerate(positions) if not LOWER[i] <= v <= UPPER[i]]
    if outside:
        raise ConfigError(
            f"default_positions is outside the joint limits for {', '.join(outside)}",
            where="robot.default_positions",
            hint="radians inside Unitree's limits (g1_29dof.urdf)",
        )
    positive = ("control_dt", "connect_timeout_s", "observation_timeout_s")
    for field in positive:
        value = getattr(config, field)
        if not (_finite(value) and value > 0):
            raise ConfigError(
                f"{field} must be a positive number of seconds, got {value!r}",
                where=f"robot.{field}",
            )
    step = config.max_relative_target
    if step is not None and not (_finite(step) and step > 0):
        raise ConfigError(
            f"max_relative_target must be a positive number of radians, got {step!r}",
            where="robot.max_relative_target",
            hint="or null for no cap",
        )
