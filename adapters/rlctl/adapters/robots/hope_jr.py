"""`--robot.type=hope_jr_arm`: Hugging Face's Hope JR arm, as LeRobot 0.6.1 drives it.

    --robot.type=hope_jr_arm --robot.port=/dev/ttyACM0 --robot.id=jr

Seven Feetech servos on one bus (protocol 0): the SM8512BL shoulder pitch (id 1) and STS3250s
for the rest (ids 2-7), every joint in -100..100 of its calibrated range. As in LeRobot the bus
connects without pinging every motor, the shoulder pitch is read on its own (not in the sync
read), and the motors are set to acceleration 30 and hold their position once connected.

Calibration (`rlctl calibrate`, `robots/hope_jr_arm/<id>.json` in LeRobot's format): LeRobot's
range finder keeps the homing offsets the motors hold and sets each joint's range; here the
joints are moved by hand through their whole ranges while the extremes are kept, and the
ranges are written to the motors' limits and saved. `rlctl setup-motors` gives the motors their
ids from the last (wrist_pitch) to the first, as LeRobot does.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.config import HopeJrArmConfig
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationPlan, CalibrationStore
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.motors import Motor

ARM_TYPE = "hope_jr_arm"
ARM_JOINTS = (
    "shoulder_pitch",
    "shoulder_yaw",
    "shoulder_roll",
    "elbow_flex",
    "wrist_roll",
    "wrist_yaw",
    "wrist_pitch",
)
ARM_ACCELERATION = 30


def hope_jr_arm_motors() -> dict[str, Motor]:
    return {
        name: Motor(i, "sm8512bl" if i == 1 else "sts3250", MotorNormMode.RANGE_M100_100)
        for i, name in enumerate(ARM_JOINTS, start=1)
    }


def _configure_arm(arm: ServoArm) -> None:
    """LeRobot's `configure`: with torque off, replies at once and acceleration 30; then hold."""
    bus = arm.bus
    bus.disable_torque()
    for motor in arm.motor_names:
        bus.write("Return_Delay_Time", motor, 0)
        bus.write("Maximum_Acceleration", motor, ARM_ACCELERATION)
        bus.write("Acceleration", motor, ARM_ACCELERATION)
    bus.enable_torque()


def _free(arm: ServoArm) -> None:
    """Torque is already off (`prepare_calibration`): the joints move by hand."""


def hope_jr_arm(
    config: HopeJrArmConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
    cameras: Mapping[str, Camera] | None = None,
) -> ArmFollower:
    arm = ServoArm(
        bus or _feetech(config.port, hope_jr_arm_motors(), config.num_read_retries),
        config.calibration_key(ARM_TYPE),
        calibration_store,
        CalibrationPlan(keeps_homing=True),
        configure=_configure_arm,
        prepare=_free,
        handshake=False,
    )
    return ArmFollower.from_config(config, arm, robot_type=ARM_TYPE, cameras=cameras)


def _feetech(port: str, motors: Mapping[str, Motor], retries: int) -> MotorBus:
    from rlctl.adapters.motors.feetech import FeetechMotorBus

    return FeetechMotorBus(port, motors, retries=retries, solo_reads=("shoulder_pitch",))
