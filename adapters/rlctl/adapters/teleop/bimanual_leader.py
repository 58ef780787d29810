"""Two leader arms as one teleoperator: the action is the left arm's joints, then the right's,
named `left_shoulder_pan.pos`, …, `right_gripper.pos` as LeRobot names them. Whatever an arm
raises names its side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlctl.adapters.robots.bimanual import SIDES, Side, on_side, prefixed
from rlctl.application.ports.robot import ACTION_KEY, CalibrationTarget
from rlctl.application.ports.teleoperator import Teleoperator
from rlctl.application.robot_features import action_feature
from rlctl.domain.features import FeatureSpec


class BimanualLeader:
    def __init__(self, left: Teleoperator, right: Teleoperator, *, teleop_type: str) -> None:
        self.arms: dict[Side, Teleoperator] = {"left": left, "right": right}
        self._type = teleop_type

    @property
    def teleop_type(self) -> str:
        return self._type

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        names: list[str] = []
        for side, arm in self.arms.items():
            names += prefixed(side, arm.action_features[ACTION_KEY].names)
        return {ACTION_KEY: action_feature(names)}

    @property
    def is_connected(self) -> bool:
        return all(arm.is_connected for arm in self.arms.values())

    def connect(self) -> None:
        try:
            for side in SIDES:
                with on_side(side):
                    self.arms[side].connect()
        except BaseException:
            self._release()
            raise

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [target for arm in self.arms.values() for target in arm.calibration_targets()]

    def reset(self) -> None:
        for arm in self.arms.values():
            arm.reset()

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        halves = []
        for side in SIDES:
            with on_side(side):
                halves.append(np.asarray(self.arms[side].get_action(observation), np.float32))
        return np.concatenate(halves)

    def disconnect(self) -> None:
        errors = self._release()
        if errors:
            raise errors[0]

    def _release(self) -> list[BaseException]:
        errors: list[BaseException] = []
        for side, arm in self.arms.items():
            if not arm.is_connected:
                continue
            try:
                with on_side(side):
                    arm.disconnect()
            except Exception as error:
                errors.append(error)
        return errors
