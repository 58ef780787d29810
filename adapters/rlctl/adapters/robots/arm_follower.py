"""A follower arm as a `Robot`: joints on a `ServoArm`, plus cameras.

The observation is the joints' present positions and the newest frame of every camera; the
action is a goal position per joint. Every goal passes the domain's `ActionGuard` against the
calibrated ranges: a small overshoot is clipped, a non-finite or absurd action holds the last
safe command (said once per episode), and with `max_relative_target` a goal too far from where
the joint is gets capped (LeRobot's `ensure_safe_goal_position`). What the guard lets through is
what `send_action` returns, so the dataset stores what the motors were really told.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from rlctl.adapters.cameras.config import build_cameras
from rlctl.adapters.cameras.robot_frames import camera_features, connect_cameras, read_cameras
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import ACTION_KEY, CalibrationTarget
from rlctl.application.robot_features import (
    STATE_KEY,
    action_feature,
    joint_names,
    state_feature,
)
from rlctl.domain.action_guard import ActionGuard, GuardDecision, step_caps
from rlctl.domain.features import FeatureSpec

if TYPE_CHECKING:
    from rlctl.adapters.robots.config import ArmFollowerConfig

log = structlog.get_logger(__name__)


class ArmFollower:
    def __init__(
        self,
        arm: ServoArm,
        cameras: Mapping[str, Camera],
        camera_sizes: Mapping[str, tuple[int, int]],
        *,
        robot_type: str,
        max_relative_target: float | Mapping[str, float] | None = None,
        disable_torque_on_disconnect: bool = True,
        label: str | None = None,
    ) -> None:
        """`camera_sizes`: (height, width) per camera, as configured (known before connect).
        `label` names the arm in what it reports (the side of a bimanual robot)."""
        self.arm = arm
        self.label = label or robot_type
        self._cameras = dict(cameras)
        self._sizes = dict(camera_sizes)
        self._robot_type = robot_type
        if max_relative_target is not None:
            step_caps(max_relative_target, arm.motor_names)  # a wrong motor name fails now
        self._max_step = max_relative_target
        self._torque_off_on_disconnect = disable_torque_on_disconnect
        self._names = joint_names(arm.motor_names)
        self._guard: ActionGuard | None = None

    @classmethod
    def from_config(
        cls,
        config: ArmFollowerConfig,
        arm: ServoArm,
        *,
        robot_type: str,
        cameras: Mapping[str, Camera] | None = None,
        label: str | None = None,
    ) -> ArmFollower:
        """The follower a config describes, on `arm`; `cameras` replace the configured ones
        (fakes in tests) but keep their configured frame sizes."""
        return cls(
            arm,
            cameras if cameras is not None else build_cameras(config.cameras),
            {name: camera.frame_size(name) for name, camera in config.cameras.items()},
            robot_type=robot_type,
            max_relative_target=config.max_relative_target,
            disable_torque_on_disconnect=config.disable_torque_on_disconnect,
            label=label,
        )

    @property
    def robot_type(self) -> str:
        return self._robot_type

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        return {
            STATE_KEY: state_feature(self._names),
            **camera_features(self._cameras, self._sizes),
        }

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self._names)}

    @property
    def realtime(self) -> bool:
        return True

    @property
    def is_connected(self) -> bool:
        return self.arm.is_connected and all(c.is_connected for c in self._cameras.values())

    def connect(self) -> None:
        self._guard = None  # limits come from the calibration this connection loads
        self.arm.connect()
        connect_cameras(self._cameras, self._sizes, release=self.disconnect)

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [self.arm]

    def reset(self) -> None:
        if self._guard is not None:
            self._guard.begin_episode()

    @property
    def episode_over(self) -> bool:
        return False

    def get_observation(self) -> dict[str, Any]:
        return {STATE_KEY: self.arm.positions(), **read_cameras(self._cameras)}

    def send_action(self, action: np.ndarray) -> np.ndarray:
        guard = self._action_guard()
        present = self.arm.positions() if self._max_step is not None else None
        decision = guard(action, present=present)
        if decision.held:
            self._report_hold(decision)
        goals = decision.values
        if goals is None:  # nothing commanded yet: the joints keep the goals they hold
            present = self.arm.positions() if present is None else present
            goals = guard.hold_at(present)
            if goals is None:
                return np.asarray(present, dtype=np.float32)
        self.arm.write_goals(goals)
        return goals

    def _action_guard(self) -> ActionGuard:
        if self._guard is None:
            self._guard = ActionGuard(self.arm.goal_limits(self._names), max_step=self._max_step)
        return self._guard

    def _report_hold(self, decision: GuardDecision) -> None:
        if decision.first_hold:
            log.warning(
                "action refused, holding the last safe command",
                robot=self.label,
                reason=decision.reason,
                note="said once per episode; every refused action is held the same way",
            )

    def disconnect(self) -> None:
        errors: list[BaseException] = []
        if self.arm.is_connected:
            try:
                self.arm.disconnect(disable_torque=self._torque_off_on_disconnect)
            except Exception as error:  # the cameras must still be released
                errors.append(error)
        for camera in self._cameras.values():
            camera.disconnect()
        if errors:
            raise errors[0]
