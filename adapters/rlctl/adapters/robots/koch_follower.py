"""Koch v1.0 / v1.1 follower arms: Dynamixel XL430 (shoulder) and XL330 servos.

Every joint but the gripper runs in extended position mode, so an arm assembled with a joint at
the encoder's wrap-around point still works; the gripper runs current-limited, so it closes on
an object without forcing. `shoulder_pan` and `wrist_roll` turn freely (whole-turn ranges).
"""

from __future__ import annotations

from collections.abc import Mapping

from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.buses import dynamixel_bus
from rlctl.adapters.robots.config import KochFollowerConfig
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationPlan, CalibrationStore
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.motors import Motor

ROBOT_TYPE = "koch_follower"
KOCH_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
FULL_TURN = ("shoulder_pan", "wrist_roll")
EXTENDED_POSITION = 4  # Dynamixel Operating_Mode
CURRENT_POSITION = 5


def koch_follower_motors(*, use_degrees: bool) -> dict[str, Motor]:
    body = MotorNormMode.DEGREES if use_degrees else MotorNormMode.RANGE_M100_100
    models = ("xl430-w250", "xl430-w250", "xl330-m288", "xl330-m288", "xl330-m288", "xl330-m288")
    return {
        name: Motor(i, model, MotorNormMode.RANGE_0_100 if name == "gripper" else body)
        for i, (name, model) in enumerate(zip(KOCH_JOINTS, models), start=1)
    }


def extended_position_mode(arm: ServoArm) -> None:
    for motor in arm.motor_names:
        arm.bus.write("Operating_Mode", motor, EXTENDED_POSITION)


def koch_operating_modes(arm: ServoArm) -> None:
    for motor in arm.motor_names:
        if motor != "gripper":
            arm.bus.write("Operating_Mode", motor, EXTENDED_POSITION)
    arm.bus.write("Operating_Mode", "gripper", CURRENT_POSITION)


def configure_follower(arm: ServoArm) -> None:
    """Koch's (and OMX's) follower set-up: position modes, LeRobot's elbow gains, torque on."""
    bus = arm.bus
    bus.disable_torque()
    bus.configure_motors()
    koch_operating_modes(arm)
    # LeRobot's gains for the elbow, which otherwise lags behind the leader.
    bus.write("Position_P_Gain", "elbow_flex", 1500)
    bus.write("Position_I_Gain", "elbow_flex", 0)
    bus.write("Position_D_Gain", "elbow_flex", 600)
    bus.enable_torque()


def koch_follower(
    config: KochFollowerConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
    cameras: Mapping[str, Camera] | None = None,
) -> ArmFollower:
    motors = koch_follower_motors(use_degrees=config.use_degrees)
    arm = ServoArm(
        bus or dynamixel_bus(config.port, motors, retries=config.num_read_retries),
        config.calibration_key(ROBOT_TYPE),
        calibration_store,
        CalibrationPlan(full_turn_motors=FULL_TURN),
        configure=configure_follower,
        prepare=extended_position_mode,
        writes_drive_modes=True,
    )
    return ArmFollower.from_config(config, arm, robot_type=ROBOT_TYPE, cameras=cameras)
