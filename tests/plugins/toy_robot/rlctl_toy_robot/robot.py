"""The plugin's adapters: a `Robot` and a `Camera`, as rlctl's ports describe them.

Every action passes the domain's `ActionGuard` before the joints move, as every rlctl robot's
does: finite, inside the joint limits, each step capped by `max_relative_target`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlctl.adapters.cameras.config import build_cameras
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import (
    IMAGES_PREFIX,
    STATE_KEY,
    action_feature,
    camera_feature,
    joint_names,
    state_feature,
)
from rlctl.domain.action_guard import ActionGuard, ActionLimits
from rlctl.domain.errors import HardwareError
from rlctl.domain.features import FeatureSpec
from rlctl_toy_robot.config import ToyCardCameraConfig, ToyRobotConfig

JOINTS = ("pan", "tilt")


class ToyRobot:
    def __init__(self, config: ToyRobotConfig) -> None:
        self._config = config
        self._names = joint_names(JOINTS)
        limit = config.limit_deg
        limits = ActionLimits(tuple(self._names), [-limit] * 2, [limit] * 2)
        self._guard = ActionGuard(limits, max_step=config.max_relative_target)
        self._cameras = build_cameras(config.cameras)
        self._sizes = {name: cam.frame_size(name) for name, cam in config.cameras.items()}
        self._state = np.zeros(2, dtype=np.float32)
        self._connected = False
        self._observations = 0

    @property
    def robot_type(self) -> str:
        return "toy"

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        features = {STATE_KEY: state_feature(self._names)}
        for name, (height, width) in self._sizes.items():
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
        return self._connected

    def connect(self) -> None:
        for camera in self._cameras.values():
            camera.connect()
        self._connected = True

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        self._guard.begin_episode()

    @property
    def episode_over(self) -> bool:
        return False

    def get_observation(self) -> dict[str, Any]:
        self._observations += 1
        if self._config.fail_at is not None and self._observations >= self._config.fail_at:
            raise HardwareError("the toy head stopped answering", where="toy robot",
                                hint="check its cable")  # fmt: skip
        observation: dict[str, Any] = {STATE_KEY: self._state.copy()}
        for name, camera in self._cameras.items():
            observation[f"{IMAGES_PREFIX}{name}"] = camera.read_latest()
        return observation

    def send_action(self, action: np.ndarray) -> np.ndarray:
        decision = self._guard(action, present=self._state)
        if decision.values is not None:
            self._state = decision.values.astype(np.float32)
        return self._state.copy()

    def disconnect(self) -> None:
        for camera in self._cameras.values():
            camera.disconnect()
        self._connected = False


def toy_robot(config: ToyRobotConfig, *, calibration_store: CalibrationStore) -> ToyRobot:
    return ToyRobot(config)


class ToyCardCamera:
    def __init__(self, config: ToyCardCameraConfig) -> None:
        self._height = int(config.height or 24)
        self._width = int(config.width or 32)
        self._fps = float(config.fps or 30.0)
        self._count = 0
        self._connected = False

    @property
    def name(self) -> str:
        return f"toy card {self._width}x{self._height}"

    @property
    def height(self) -> int:
        return self._height

    @property
    def width(self) -> int:
        return self._width

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        self._connected = True

    def read(self) -> np.ndarray:
        self._count += 1
        frame = np.zeros((self._height, self._width, 3), dtype=np.uint8)
        frame[:, : self._width // 2] = (40 * self._count) % 256
        frame[:, self._width // 2 :, 1] = 200
        return frame

    def async_read(self, timeout_s: float = 0.2) -> np.ndarray:
        return self.read()

    def read_latest(self, max_age_s: float = 0.5) -> np.ndarray:
        return self.read()

    def disconnect(self) -> None:
        self._connected = False
