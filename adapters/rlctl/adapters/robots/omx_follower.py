"""ROBOTIS OpenMANIPULATOR-X (OMX) follower arms: Dynamixel XL430-W250 (shoulder, elbow) and
XL330-M288 (wrist, gripper) servos, ids 11 to 16.

The OMX comes calibrated from ROBOTIS: its calibration is the factory one (no homing offset, the
whole encoder turn as range, no inverted motor), written to the motors and saved in LeRobot's
file on the first connect, with nothing to move. Otherwise it is driven as a Koch follower is:
extended position mode for the joints, the gripper current-limited, LeRobot's elbow gains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.buses import dynamixel_bus
from rlctl.adapters.robots.config import OmxFollowerConfig
from rlctl.adapters.robots.koch_follower import (
    KOCH_JOINTS,
    configure_follower,
    extended_position_mode,
)
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationPlan, CalibrationStore
from rlctl.domain.calibration import Calibration, MotorCalibration, MotorNormMode
from rlctl.domain.motors import Motor

ROBOT_TYPE = "omx_follower"
OMX_JOINTS = KOCH_JOINTS
FIRST_ID = 11
MODELS = ("xl430-w250", "xl430-w250", "xl430-w250", "xl330-m288", "xl330-m288", "xl330-m288")


def omx_follower_motors(*, use_degrees: bool) -> dict[str, Motor]:
    body = MotorNormMode.DEGREES if use_degrees else MotorNormMode.RANGE_M100_100
    return {
        name: Motor(i, model, MotorNormMode.RANGE_0_100 if name == "gripper" else body)
        for i, (name, model) in enumerate(zip(OMX_JOINTS, MODELS, strict=True), start=FIRST_ID)
    }


def factory_calibration(
    motors: Mapping[str, Motor],
    *,
    inverted: Sequence[str] = (),
    homing_offsets: Mapping[str, int] | None = None,
) -> Calibration:
    """ROBOTIS's calibration as LeRobot writes it: the whole turn (0..4095) for every motor,
    `inverted` motors with drive mode 1, homing offsets 0 unless given."""
    offsets = homing_offsets or {}
    return Calibration(
        {
            name: MotorCalibration(
                id=motor.id,
                drive_mode=1 if name in inverted else 0,
                homing_offset=int(offsets.get(name, 0)),
                range_min=0,
                range_max=4095,
            )
            for name, motor in motors.items()
        }
    )


def omx_follower(
    config: OmxFollowerConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
    cameras: Mapping[str, Camera] | None = None,
) -> ArmFollower:
    motors = omx_follower_motors(use_degrees=config.use_degrees)
    arm = ServoArm(
        bus or dynamixel_bus(config.port, motors),
        config.calibration_key(ROBOT_TYPE),
        calibration_store,
        CalibrationPlan(factory_calibration=factory_calibration(motors)),
        configure=configure_follower,
        prepare=extended_position_mode,
        writes_drive_modes=True,
    )
    return ArmFollower.from_config(config, arm, robot_type=ROBOT_TYPE, cameras=cameras)
