"""`--teleop.type=openarm_mini` / `bi_openarm_mini`: the OpenArm Mini, a small leader of eight
Feetech STS3215 servos (ids 1-8: `joint_1` … `joint_7`, `gripper`) for the OpenArm follower, as
LeRobot 0.6.1's `OpenArmMini` reads it.

    --teleop.type=openarm_mini --teleop.port=/dev/ttyACM0 --teleop.side=right --teleop.id=mini

Its action is the follower's: `joint_1.pos` … `joint_7.pos`, `gripper.pos` in degrees. As in
LeRobot, the Mini's `joint_6` drives the follower's `joint_7` and its `joint_7` the follower's
`joint_6`; with a `side`, LeRobot's joints of that side change sign; the gripper's 0 (closed) ..
100 (open) becomes 0 .. -65 degrees. Torque is off, so the arm moves freely.

Calibration (`rlctl calibrate`, saved as `teleoperators/openarm_mini/<id>.json` in LeRobot's
format): the arm hanging straight down with the gripper closed is every joint's zero (half-turn
homing), the joints get the whole turn, and the gripper's range is read fully closed, then fully
open. The bimanual pair calibrates each arm as `<id>_left` / `<id>_right`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlctl.adapters.robots.bimanual import SIDES, require_bimanual_id, require_two_ports
from rlctl.adapters.robots.buses import feetech_bus
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.adapters.robots.so_follower import position_mode
from rlctl.adapters.teleop.arm_leader import ArmLeader
from rlctl.adapters.teleop.bimanual_leader import BimanualLeader
from rlctl.adapters.teleop.config import BiOpenArmMiniConfig, OpenArmMiniConfig
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationPlan, CalibrationStore
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.motors import Motor

TELEOP_TYPE = "openarm_mini"
MINI_JOINTS = tuple(f"joint_{i}" for i in range(1, 8))
MINI_MOTORS = (*MINI_JOINTS, "gripper")
# LeRobot's per-side direction flips, by the Mini's motor names.
SIDE_MOTORS_TO_FLIP: dict[str, tuple[str, ...]] = {
    "left": ("joint_1", "joint_3", "joint_4", "joint_5", "joint_6", "joint_7"),
    "right": ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_7"),
}
# The Mini's joint_6 is the follower's joint_7 and the other way round.
JOINT_REMAP = {"joint_6": "joint_7", "joint_7": "joint_6"}
GRIPPER_TELEOP_TO_DEGREES = -0.65  # 0 (closed) .. 100 (open) -> 0 .. -65 degrees
PHASE = 12  # LeRobot writes it to every motor before calibrating


def openarm_mini_motors() -> dict[str, Motor]:
    return {
        name: Motor(
            i, "sts3215", MotorNormMode.RANGE_0_100 if name == "gripper" else MotorNormMode.DEGREES
        )
        for i, name in enumerate(MINI_MOTORS, start=1)
    }


def _prepare(arm: ServoArm) -> None:
    for motor in arm.motor_names:
        arm.bus.write("Phase", motor, PHASE)
    position_mode(arm)


def _configure(arm: ServoArm) -> None:
    arm.bus.disable_torque()
    arm.bus.configure_motors()
    position_mode(arm)


class OpenArmMiniLeader(ArmLeader):
    """The Mini's readings as the OpenArm follower's action (LeRobot's `get_action`)."""

    def __init__(self, arm: ServoArm, *, side: str | None) -> None:
        super().__init__(arm, teleop_type=TELEOP_TYPE)  # joint_1.pos ... gripper.pos
        flips = SIDE_MOTORS_TO_FLIP.get(side, ()) if side else ()
        # The follower's joint n is the Mini's motor JOINT_REMAP[n], sign-flipped or scaled.
        sources = [JOINT_REMAP.get(name, name) for name in arm.motor_names]
        self._source = np.asarray([arm.motor_names.index(motor) for motor in sources])
        self._scale = np.asarray(
            [
                GRIPPER_TELEOP_TO_DEGREES if m == "gripper" else -1.0 if m in flips else 1.0
                for m in sources
            ],
            dtype=np.float32,
        )

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        return self.arm.positions()[self._source] * self._scale


def openarm_mini(
    config: OpenArmMiniConfig, *, calibration_store: CalibrationStore, bus: MotorBus | None = None
) -> OpenArmMiniLeader:
    arm = ServoArm(
        bus or feetech_bus(config.port, openarm_mini_motors(), retries=config.num_read_retries),
        config.calibration_key(TELEOP_TYPE),
        calibration_store,
        CalibrationPlan(
            full_turn_motors=MINI_JOINTS,
            closed_open_motors=("gripper",),
            zero_pose="hanging straight down, with the gripper closed,",
        ),
        configure=_configure,
        prepare=_prepare,
    )
    return OpenArmMiniLeader(arm, side=config.side)


def bi_openarm_mini(
    config: BiOpenArmMiniConfig,
    *,
    calibration_store: CalibrationStore,
    buses: Mapping[str, MotorBus] | None = None,
) -> BimanualLeader:
    """Two Minis (LeRobot's `bi_openarm_mini`), each on its own motors board, each flipped as
    the side it is on."""
    require_bimanual_id(config.id, "teleop")
    require_two_ports(config.left_arm_config.port, config.right_arm_config.port, "teleop")
    arms = {
        side: openarm_mini(
            config.arm(side), calibration_store=calibration_store, bus=(buses or {}).get(side)
        )
        for side in SIDES
    }
    return BimanualLeader(arms["left"], arms["right"], teleop_type="bi_openarm_mini")
