"""SO-100 / SO-101 leader arms: the same six STS3215 servos, torque off, moved by hand."""

from __future__ import annotations

from rlctl.adapters.robots.buses import feetech_bus
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.adapters.robots.so_follower import FULL_TURN, position_mode, so_motors
from rlctl.adapters.teleop.arm_leader import ArmLeader
from rlctl.adapters.teleop.config import SOLeaderConfig
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationKey, CalibrationPlan, CalibrationStore

TELEOP_TYPE = "so_leader"


def _configure(arm: ServoArm) -> None:
    arm.bus.disable_torque()
    arm.bus.configure_motors()
    position_mode(arm)


def so_leader(
    config: SOLeaderConfig, *, calibration_store: CalibrationStore, bus: MotorBus | None = None
) -> ArmLeader:
    motors = so_motors(use_degrees=config.use_degrees)
    arm = ServoArm(
        bus or feetech_bus(config.port, motors, retries=config.num_read_retries),
        CalibrationKey("teleoperators", TELEOP_TYPE, config.id, config.calibration_dir),
        calibration_store,
        CalibrationPlan(full_turn_motors=FULL_TURN),
        configure=_configure,
        prepare=position_mode,
    )
    return ArmLeader(arm, teleop_type=TELEOP_TYPE)
