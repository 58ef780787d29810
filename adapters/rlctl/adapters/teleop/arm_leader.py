"""A leader arm as a `Teleoperator`: the action is where a person holds its joints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.application.ports.robot import ACTION_KEY, CalibrationTarget
from rlctl.application.robot_features import action_feature, joint_names
from rlctl.domain.features import FeatureSpec


class ArmLeader:
    def __init__(self, arm: ServoArm, *, teleop_type: str) -> None:
        self.arm = arm
        self._type = teleop_type
        self._names = joint_names(arm.motor_names)

    @property
    def teleop_type(self) -> str:
        return self._type

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self._names)}

    @property
    def is_connected(self) -> bool:
        return self.arm.is_connected

    def connect(self) -> None:
        self.arm.connect()

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [self.arm]

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        return self.arm.positions()

    def disconnect(self) -> None:
        self.arm.disconnect()
