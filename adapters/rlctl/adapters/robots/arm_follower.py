"""A follower arm as a `Robot`: joints on a `ServoArm`, plus cameras.

The observation is the joints' present positions and the newest frame of every camera; the
action is a goal position per joint. With `max_relative_target` a goal too far from where the
joint is gets capped (LeRobot's `ensure_safe_goal_position`), and the capped goal is what
`send_action` returns, so the dataset stores what the motors were really told.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from rlctl.adapters.cameras.config import build_cameras
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import ACTION_KEY, CalibrationTarget
from rlctl.application.robot_features import (
    IMAGES_PREFIX,
    STATE_KEY,
    action_feature,
    camera_feature,
    joint_names,
    state_feature,
)
from rlctl.domain.errors import HardwareError, InvalidInput
from rlctl.domain.features import FeatureSpec

if TYPE_CHECKING:
    from rlctl.adapters.robots.config import ArmFollowerConfig

log = structlog.get_logger(__name__)


def cap_goals(
    goals: np.ndarray,
    present: np.ndarray,
    max_step: float | Mapping[str, float],
    motors: Sequence[str],
) -> np.ndarray:
    """Goals moved towards `present` until each is within its motor's `max_step`."""
    if isinstance(max_step, Mapping):
        missing = [m for m in motors if m not in max_step]
        if missing or set(max_step) - set(motors):
            raise InvalidInput(
                f"max_relative_target names {sorted(max_step)}, the motors are {list(motors)}",
                where="max_relative_target",
            )
        caps = np.asarray([max_step[m] for m in motors], dtype=np.float32)
    else:
        caps = np.full(len(motors), float(max_step), dtype=np.float32)
    return present + np.clip(goals - present, -caps, caps)


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
    ) -> None:
        """`camera_sizes`: (height, width) per camera, as configured (known before connect)."""
        self.arm = arm
        self._cameras = dict(cameras)
        self._sizes = dict(camera_sizes)
        self._robot_type = robot_type
        self._max_step = max_relative_target
        self._torque_off_on_disconnect = disable_torque_on_disconnect
        self._names = joint_names(arm.motor_names)

    @classmethod
    def from_config(
        cls,
        config: ArmFollowerConfig,
        arm: ServoArm,
        *,
        robot_type: str,
        cameras: Mapping[str, Camera] | None = None,
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
        )

    @property
    def robot_type(self) -> str:
        return self._robot_type

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        features = {STATE_KEY: state_feature(self._names)}
        for name in self._cameras:
            height, width = self._sizes[name]
            spec = camera_feature(name, height, width)
            features[spec.key] = spec
        return features

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
        self.arm.connect()
        try:
            for camera in self._cameras.values():
                camera.connect()
        except BaseException:
            self.disconnect()
            raise
        self._check_frame_sizes()

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [self.arm]

    def reset(self) -> None:
        pass

    @property
    def episode_over(self) -> bool:
        return False

    def get_observation(self) -> dict[str, Any]:
        observation: dict[str, Any] = {STATE_KEY: self.arm.positions()}
        for name, camera in self._cameras.items():
            observation[f"{IMAGES_PREFIX}{name}"] = camera.read_latest()
        return observation

    def send_action(self, action: np.ndarray) -> np.ndarray:
        goals = np.asarray(action, dtype=np.float32).reshape(-1)
        if goals.shape[0] != len(self._names):
            raise InvalidInput(
                f"an action has {goals.shape[0]} values, the arm {len(self._names)} joints",
                where=self._robot_type,
            )
        if self._max_step is not None:
            goals = cap_goals(goals, self.arm.positions(), self._max_step, self.arm.motor_names)
        self.arm.write_goals(goals)
        return goals.astype(np.float32, copy=False)

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

    def _check_frame_sizes(self) -> None:
        for name, camera in self._cameras.items():
            expected = self._sizes[name]
            if (camera.height, camera.width) != expected:
                self.disconnect()
                raise HardwareError(
                    f"camera {name!r} gives {camera.width}x{camera.height} frames, the robot "
                    f"declares {expected[1]}x{expected[0]}",
                    where=camera.name,
                    hint="set the camera's width and height to what it delivers",
                )
