"""A robot with no hardware: joints that go where they are told, and any cameras.

`observation.state` is the last action sent (zeros before the first), so a recording shows
exactly what was commanded. Actions pass the domain's `ActionGuard` as on a real arm: against
`limits` (none by default: only non-finite actions are held), with `max_relative_target` capping
each step, so the action sent differs from the one asked for; `held` counts refused actions.
`episode_length` ends episodes like a simulator; `work_s` advances a `ManualClock` per tick, as
slow hardware would; `fail_at` raises an error at a given observation number. Everything done
to it is counted for assertions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlctl.adapters.cameras.robot_frames import camera_features, read_cameras
from rlctl.adapters.memory.clock import ManualClock
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import ACTION_KEY, CalibrationTarget
from rlctl.application.robot_features import (
    STATE_KEY,
    action_feature,
    joint_names,
    state_feature,
)
from rlctl.domain.action_guard import ActionGuard, ActionLimits
from rlctl.domain.errors import HardwareError
from rlctl.domain.features import FeatureSpec

DEFAULT_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "gripper")


class ScriptedRobot:
    def __init__(
        self,
        joints: Sequence[str] = DEFAULT_JOINTS,
        cameras: Mapping[str, Camera] | None = None,
        *,
        robot_type: str = "scripted",
        realtime: bool = True,
        max_relative_target: float | None = None,
        episode_length: int | None = None,
        clock: ManualClock | None = None,
        work_s: float = 0.0,
        fail_at: Mapping[int, Exception] | None = None,
        calibration_targets: Sequence[CalibrationTarget] = (),
        task: str | None = None,
        limits: tuple[Sequence[float], Sequence[float]] | None = None,
    ) -> None:
        """`limits`: (low, high) per joint, in the action's units."""
        self._names = joint_names(joints)
        bounds = (
            ActionLimits.unbounded(self._names)
            if limits is None
            else ActionLimits(tuple(self._names), limits[0], limits[1])
        )
        self._guard = ActionGuard(bounds, max_step=max_relative_target)
        self._cameras = dict(cameras or {})
        self._robot_type = robot_type
        self._realtime = realtime
        self._episode_length = episode_length
        self._clock = clock
        self._work_s = work_s
        self._fail_at = dict(fail_at or {})
        self._targets = list(calibration_targets)
        self._task = task
        self._connected = False
        self._state = np.zeros(len(self._names), dtype=np.float32)
        self._steps = 0
        self.observations = 0
        self.requested: list[np.ndarray] = []
        self.sent: list[np.ndarray] = []
        self.resets = 0
        self.connects = 0
        self.disconnects = 0

    @property
    def robot_type(self) -> str:
        return self._robot_type

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        sizes = {name: (camera.height, camera.width) for name, camera in self._cameras.items()}
        return {STATE_KEY: state_feature(self._names), **camera_features(self._cameras, sizes)}

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self._names)}

    @property
    def realtime(self) -> bool:
        return self._realtime

    @property
    def is_connected(self) -> bool:
        return self._connected

    @property
    def state(self) -> np.ndarray:
        return self._state.copy()

    def connect(self) -> None:
        self.connects += 1
        for camera in self._cameras.values():
            camera.connect()
        self._connected = True

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return list(self._targets)

    def reset(self) -> None:
        self.resets += 1
        self._steps = 0
        self._guard.begin_episode()

    @property
    def episode_over(self) -> bool:
        return self._episode_length is not None and self._steps >= self._episode_length

    def get_observation(self) -> dict[str, Any]:
        self._require_connected()
        self.observations += 1
        if self.observations in self._fail_at:
            raise self._fail_at[self.observations]
        if self._clock is not None and self._work_s:
            self._clock.advance(self._work_s)
        observation: dict[str, Any] = {STATE_KEY: self._state.copy()}
        observation.update(read_cameras(self._cameras))
        if self._task is not None:
            observation["task"] = self._task
        return observation

    @property
    def held(self) -> int:
        """How many actions the guard refused (and held the last safe command for)."""
        return self._guard.holds

    def send_action(self, action: np.ndarray) -> np.ndarray:
        self._require_connected()
        decision = self._guard(action, present=self._state)
        self.requested.append(np.array(action, dtype=np.float32, copy=True).reshape(-1))
        if decision.values is not None:
            self._state = decision.values.astype(np.float32)
        self.sent.append(self._state.copy())
        self._steps += 1
        return self._state.copy()

    def disconnect(self) -> None:
        self.disconnects += 1
        for camera in self._cameras.values():
            camera.disconnect()
        self._connected = False

    def _require_connected(self) -> None:
        if not self._connected:
            raise HardwareError("the robot is not connected", where=self._robot_type)
