"""SO-100 / SO-101 follower arms: six Feetech STS3215 servos, LeRobot's settings.

Position mode with LeRobot's PID gains; the gripper's torque, current and overload limits are
halved so that it cannot burn out squeezing an object. `wrist_roll` turns freely, so
calibration gives it the whole turn rather than a recorded range.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.buses import feetech_bus
from rlctl.adapters.robots.config import SOFollowerConfig
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationPlan, CalibrationStore
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.motors import Motor

if TYPE_CHECKING:
    from rlctl.adapters.teleop.config import SOLeaderConfig

ROBOT_TYPE = "so_follower"  # LeRobot 0.6.1's name for SO-100 and SO-101 followers alike
SO_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
FULL_TURN = ("wrist_roll",)
POSITION_MODE = 0  # Feetech Operating_Mode


def so_motors(*, use_degrees: bool) -> dict[str, Motor]:
    body = MotorNormMode.DEGREES if use_degrees else MotorNormMode.RANGE_M100_100
    return {
        name: Motor(i, "sts3215", MotorNormMode.RANGE_0_100 if name == "gripper" else body)
        for i, name in enumerate(SO_JOINTS, start=1)
    }


def position_mode(arm: ServoArm) -> None:
    for motor in arm.motor_names:
        arm.bus.write("Operating_Mode", motor, POSITION_MODE)


def so_arm(
    config: SOFollowerConfig | SOLeaderConfig,
    device_type: str,
    calibration_store: CalibrationStore,
    *,
    bus: MotorBus | None,
    configure: Callable[[ServoArm], None],
) -> ServoArm:
    """A follower's or a leader's six servos: they differ only in how they are configured."""
    motors = so_motors(use_degrees=config.use_degrees)
    return ServoArm(
        bus or feetech_bus(config.port, motors, retries=config.num_read_retries),
        config.calibration_key(device_type),
        calibration_store,
        CalibrationPlan(full_turn_motors=FULL_TURN),
        configure=configure,
        prepare=position_mode,
    )


def _configure(config: SOFollowerConfig):
    def configure(arm: ServoArm) -> None:
        bus = arm.bus
        bus.disable_torque()
        bus.configure_motors()
        for motor in arm.motor_names:
            bus.write("Operating_Mode", motor, POSITION_MODE)
            bus.write("P_Coefficient", motor, config.position_p_coefficient)
            bus.write("I_Coefficient", motor, config.position_i_coefficient)
            bus.write("D_Coefficient", motor, config.position_d_coefficient)
            if motor == "gripper":
                bus.write("Max_Torque_Limit", motor, 500)
                bus.write("Protection_Current", motor, 250)
                bus.write("Overload_Torque", motor, 25)
        bus.enable_torque()

    return configure


def so_follower(
    config: SOFollowerConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
    cameras: Mapping[str, Camera] | None = None,
    label: str | None = None,
) -> ArmFollower:
    arm = so_arm(config, ROBOT_TYPE, calibration_store, bus=bus, configure=_configure(config))
    return ArmFollower.from_config(config, arm, robot_type=ROBOT_TYPE, cameras=cameras, label=label)
