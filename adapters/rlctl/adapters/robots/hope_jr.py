"""`--robot.type=hope_jr_arm` / `hope_jr_hand`: Hugging Face's Hope JR arm and hand, as LeRobot
0.6.1 drives them.

    --robot.type=hope_jr_arm --robot.port=/dev/ttyACM0 --robot.id=jr
    --robot.type=hope_jr_hand --robot.port=/dev/ttyACM1 --robot.side=right --robot.id=jr

Seven Feetech servos on one bus (protocol 0): the SM8512BL shoulder pitch (id 1) and STS3250s
for the rest (ids 2-7), every joint in -100..100 of its calibrated range. As in LeRobot the bus
connects without pinging every motor, the shoulder pitch is read on its own (not in the sync
read), and the motors are set to acceleration 30 and hold their position once connected.

Calibration (`rlctl calibrate`, `robots/hope_jr_arm/<id>.json` in LeRobot's format): LeRobot's
range finder keeps the homing offsets the motors hold and sets each joint's range; here the
joints are moved by hand through their whole ranges while the extremes are kept, and the
ranges are written to the motors' limits and saved. `rlctl setup-motors` gives the motors their
ids from the last (wrist_pitch) to the first, as LeRobot does.

The hand: sixteen Feetech SCS0009 servos (ids 1-16) on Feetech's protocol 1 (each motor read on
its own), each in 0..100 of its range. Its calibration records the ranges finger by finger
(LeRobot's groups) with no homing offset, and gives drive mode 1 to the motors LeRobot reverses
for its side. `rlctl setup-motors` goes from thumb_cmc to pinky_pip_dip, as LeRobot does.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.config import HopeJrArmConfig, HopeJrHandConfig
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

HAND_TYPE = "hope_jr_hand"
FINGERS = ("thumb", "index", "middle", "ring", "pinky")
HAND_MOTORS = (
    "thumb_cmc",
    "thumb_mcp",
    "thumb_pip",
    "thumb_dip",
    "index_radial_flexor",
    "index_ulnar_flexor",
    "index_pip_dip",
    "middle_radial_flexor",
    "middle_ulnar_flexor",
    "middle_pip_dip",
    "ring_radial_flexor",
    "ring_ulnar_flexor",
    "ring_pip_dip",
    "pinky_radial_flexor",
    "pinky_ulnar_flexor",
    "pinky_pip_dip",
)
# LeRobot's motors driven in reverse, per side.
HAND_INVERSIONS = {
    "right": (
        "thumb_mcp",
        "thumb_dip",
        "index_ulnar_flexor",
        "middle_ulnar_flexor",
        "ring_ulnar_flexor",
        "ring_pip_dip",
        "pinky_ulnar_flexor",
        "pinky_pip_dip",
    ),
    "left": (
        "thumb_cmc",
        "thumb_mcp",
        "thumb_dip",
        "index_radial_flexor",
        "index_pip_dip",
        "middle_radial_flexor",
        "middle_pip_dip",
        "ring_radial_flexor",
        "ring_pip_dip",
        "pinky_radial_flexor",
    ),
}
HAND_ACCELERATION = 254


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


def hope_jr_hand_motors() -> dict[str, Motor]:
    return {
        name: Motor(i, "scs0009", MotorNormMode.RANGE_0_100)
        for i, name in enumerate(HAND_MOTORS, start=1)
    }


def _configure_hand(arm: ServoArm) -> None:
    """LeRobot's `configure`: with torque off, replies at once and the fastest acceleration
    (`configure_motors`'s defaults on protocol 1); then hold."""
    bus = arm.bus
    bus.disable_torque()
    for motor in arm.motor_names:
        bus.write("Return_Delay_Time", motor, 0)
        bus.write("Acceleration", motor, HAND_ACCELERATION)
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
        bus
        or _feetech(
            config.port, hope_jr_arm_motors(), config.num_read_retries, solo=("shoulder_pitch",)
        ),
        config.calibration_key(ARM_TYPE),
        calibration_store,
        CalibrationPlan(keeps_homing=True),
        configure=_configure_arm,
        prepare=_free,
        handshake=False,
    )
    return ArmFollower.from_config(config, arm, robot_type=ARM_TYPE, cameras=cameras)


def hope_jr_hand(
    config: HopeJrHandConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
    cameras: Mapping[str, Camera] | None = None,
) -> ArmFollower:
    arm = ServoArm(
        bus or _feetech(config.port, hope_jr_hand_motors(), config.num_read_retries),
        config.calibration_key(HAND_TYPE),
        calibration_store,
        CalibrationPlan(
            keeps_homing=True,
            resolution=1024,
            drive_modes=dict.fromkeys(HAND_INVERSIONS[config.side], 1),
            range_groups=tuple(
                (finger, tuple(m for m in HAND_MOTORS if m.startswith(finger)))
                for finger in FINGERS
            ),
            setup_order=HAND_MOTORS,
        ),
        configure=_configure_hand,
        prepare=_free,
    )
    return ArmFollower.from_config(config, arm, robot_type=HAND_TYPE, cameras=cameras)


def _feetech(
    port: str, motors: Mapping[str, Motor], retries: int, *, solo: tuple[str, ...] = ()
) -> MotorBus:
    from rlctl.adapters.motors.feetech import FeetechMotorBus

    return FeetechMotorBus(port, motors, retries=retries, solo_reads=solo)
