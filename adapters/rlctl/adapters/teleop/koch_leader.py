"""Koch leader arms: six Dynamixel XL330-M077 servos, moved by hand.

The elbow is mounted the other way round, so its drive mode is inverted at calibration. The
gripper keeps torque on, current-limited, held at `gripper_open_pos`: squeezed it gives, let go it
springs back, a trigger for the follower's gripper.
"""

from __future__ import annotations

from rlctl.adapters.robots.buses import dynamixel_bus
from rlctl.adapters.robots.koch_follower import (
    FULL_TURN,
    KOCH_JOINTS,
    extended_position_mode,
    koch_operating_modes,
)
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.adapters.teleop.arm_leader import ArmLeader
from rlctl.adapters.teleop.config import KochLeaderConfig
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationPlan, CalibrationStore
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.motors import Motor

TELEOP_TYPE = "koch_leader"
INVERTED = {"elbow_flex": 1}


def koch_leader_motors() -> dict[str, Motor]:
    return {
        name: Motor(
            i,
            "xl330-m077",
            MotorNormMode.RANGE_0_100 if name == "gripper" else MotorNormMode.RANGE_M100_100,
        )
        for i, name in enumerate(KOCH_JOINTS, start=1)
    }


def _prepare(arm: ServoArm) -> None:
    extended_position_mode(arm)
    for motor, mode in INVERTED.items():
        arm.bus.write("Drive_Mode", motor, mode)


def _configure(config: KochLeaderConfig):
    def configure(arm: ServoArm) -> None:
        bus = arm.bus
        bus.disable_torque()
        bus.configure_motors()
        koch_operating_modes(arm)
        bus.enable_torque(["gripper"])
        if arm.is_calibrated:
            bus.write("Goal_Position", "gripper", config.gripper_open_pos)

    return configure


def koch_leader(
    config: KochLeaderConfig, *, calibration_store: CalibrationStore, bus: MotorBus | None = None
) -> ArmLeader:
    arm = ServoArm(
        bus or dynamixel_bus(config.port, koch_leader_motors()),
        config.calibration_key(TELEOP_TYPE),
        calibration_store,
        CalibrationPlan(full_turn_motors=FULL_TURN, drive_modes=INVERTED),
        configure=_configure(config),
        prepare=_prepare,
        writes_drive_modes=True,
    )
    return ArmLeader(arm, teleop_type=TELEOP_TYPE)
