"""`--teleop.type=openarm_leader`: an OpenArm moved by hand, read as the action of a follower,
as LeRobot 0.6.1's `OpenArmLeader` does.

Actions are `joint_1.pos` … `gripper.pos` in degrees (and `.vel`, `.torque` per motor with
`use_velocity_and_torque`). With `manual_control` (the default) torque is off so the arm moves
freely. Calibration is the follower's (zero in the hanging pose, -90..90), in
`teleoperators/openarm_leader/<id>.json`. Like LeRobot's, a calibrated leader takes where it is
at connect as its zero again: connect it hanging straight down, gripper closed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlctl.adapters.robots.bimanual import SIDES, require_bimanual_id, require_two_ports
from rlctl.adapters.robots.openarm_follower import DamiaoArm, openarm_bus, openarm_gains
from rlctl.adapters.teleop.bimanual_leader import BimanualLeader
from rlctl.adapters.teleop.config import BiOpenArmLeaderConfig, OpenArmLeaderConfig
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import action_feature, joint_names
from rlctl.domain.features import FeatureSpec

TELEOP_TYPE = "openarm_leader"


class OpenArmLeader:
    def __init__(
        self, arm: DamiaoArm, *, use_velocity_and_torque: bool = False, manual_control: bool = True
    ) -> None:
        self.arm = arm
        self._full = use_velocity_and_torque
        self._manual = manual_control

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        if self._full:
            names = [
                f"{motor}{suffix}"
                for motor in self.arm.motor_names
                for suffix in (".pos", ".vel", ".torque")
            ]
        else:
            names = joint_names(self.arm.motor_names)
        return {ACTION_KEY: action_feature(names)}

    @property
    def is_connected(self) -> bool:
        return self.arm.is_connected

    def connect(self) -> None:
        self.arm.connect()
        if self.arm.is_calibrated:
            try:
                self.arm.bus.set_zero_position()  # LeRobot's leader re-zeroes on every connect
            except BaseException:
                self.arm.disconnect(disable_torque=False)
                raise

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [self.arm]

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        return self.arm.states() if self._full else self.arm.positions()

    def disconnect(self) -> None:
        if self.arm.is_connected:
            # LeRobot's: a leader held in MIT mode keeps its torque rather than drop.
            self.arm.disconnect(disable_torque=self._manual)


def openarm_leader(
    config: OpenArmLeaderConfig, *, calibration_store: CalibrationStore
) -> OpenArmLeader:
    arm = DamiaoArm(
        openarm_bus(config),
        config.calibration_key(TELEOP_TYPE),
        calibration_store,
        openarm_gains(config),
        hold_torque=not config.manual_control,
    )
    return OpenArmLeader(
        arm,
        use_velocity_and_torque=config.use_velocity_and_torque,
        manual_control=config.manual_control,
    )


def bi_openarm_leader(
    config: BiOpenArmLeaderConfig, *, calibration_store: CalibrationStore
) -> BimanualLeader:
    """Two OpenArm leaders (LeRobot's `bi_openarm_leader`), each on its own CAN interface."""
    require_bimanual_id(config.id, "teleop")
    require_two_ports(config.left_arm_config.port, config.right_arm_config.port, "teleop")
    arms = {
        side: openarm_leader(config.arm(side), calibration_store=calibration_store)
        for side in SIDES
    }
    return BimanualLeader(arms["left"], arms["right"], teleop_type="bi_openarm_leader")
