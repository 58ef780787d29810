"""SO-100 / SO-101 leader arms: the same six STS3215 servos, torque off, moved by hand."""

from __future__ import annotations

from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.adapters.robots.so_follower import position_mode, so_arm
from rlctl.adapters.teleop.arm_leader import ArmLeader
from rlctl.adapters.teleop.config import SOLeaderConfig
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationStore

TELEOP_TYPE = "so_leader"


def _configure(arm: ServoArm) -> None:
    arm.bus.disable_torque()
    arm.bus.configure_motors()
    position_mode(arm)


def so_leader(
    config: SOLeaderConfig, *, calibration_store: CalibrationStore, bus: MotorBus | None = None
) -> ArmLeader:
    arm = so_arm(config, TELEOP_TYPE, calibration_store, bus=bus, configure=_configure)
    return ArmLeader(arm, teleop_type=TELEOP_TYPE)
