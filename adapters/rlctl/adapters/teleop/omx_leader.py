"""ROBOTIS OMX leader arms: five Dynamixel XL330-M288 servos and an XL330-M077 gripper, ids 1
to 6, moved by hand.

Calibrated at the factory, as the follower is, except the gripper: inverted, with a homing
offset of 100 (LeRobot's values). The gripper keeps torque on, current-limited (100), held at
`gripper_open_pos`: squeezed it gives, let go it springs back, a trigger for the follower's.
"""

from __future__ import annotations

from collections.abc import Callable

from rlctl.adapters.robots.buses import dynamixel_bus
from rlctl.adapters.robots.koch_follower import extended_position_mode, koch_operating_modes
from rlctl.adapters.robots.omx_follower import OMX_JOINTS, factory_calibration
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.adapters.teleop.arm_leader import ArmLeader
from rlctl.adapters.teleop.config import OmxLeaderConfig
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationPlan, CalibrationStore
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.motors import Motor

TELEOP_TYPE = "omx_leader"
INVERTED = ("gripper",)
GRIPPER_HOMING_OFFSET = 100
GRIPPER_CURRENT = 100


def omx_leader_motors() -> dict[str, Motor]:
    return {
        name: Motor(
            i,
            "xl330-m077" if name == "gripper" else "xl330-m288",
            MotorNormMode.RANGE_0_100 if name == "gripper" else MotorNormMode.RANGE_M100_100,
        )
        for i, name in enumerate(OMX_JOINTS, start=1)
    }


def _configure(config: OmxLeaderConfig) -> Callable[[ServoArm], None]:
    def configure(arm: ServoArm) -> None:
        bus = arm.bus
        bus.disable_torque()
        bus.configure_motors()
        koch_operating_modes(arm)
        for motor in arm.motor_names:
            bus.write("Drive_Mode", motor, 1 if motor in INVERTED else 0)
        bus.write("Current_Limit", "gripper", GRIPPER_CURRENT)
        bus.write("Goal_Current", "gripper", GRIPPER_CURRENT)
        bus.write("Homing_Offset", "gripper", GRIPPER_HOMING_OFFSET, normalize=False)
        bus.enable_torque(["gripper"])
        if arm.is_calibrated:
            bus.write("Goal_Position", "gripper", config.gripper_open_pos)

    return configure


def omx_leader(
    config: OmxLeaderConfig, *, calibration_store: CalibrationStore, bus: MotorBus | None = None
) -> ArmLeader:
    motors = omx_leader_motors()
    factory = factory_calibration(
        motors, inverted=INVERTED, homing_offsets={"gripper": GRIPPER_HOMING_OFFSET}
    )
    arm = ServoArm(
        bus or dynamixel_bus(config.port, motors),
        config.calibration_key(TELEOP_TYPE),
        calibration_store,
        CalibrationPlan(factory_calibration=factory),
        configure=_configure(config),
        prepare=extended_position_mode,
        writes_drive_modes=True,
    )
    return ArmLeader(arm, teleop_type=TELEOP_TYPE)
