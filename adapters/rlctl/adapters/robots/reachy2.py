"""`--robot.type=reachy2`: Pollen Robotics' Reachy 2 over gRPC, as LeRobot 0.6.1's `Reachy2Robot`.

Features are LeRobot's: `observation.state` and `action` name the joints of the parts in use
(neck yaw/pitch/roll, each arm's shoulder pitch/roll, elbow yaw/pitch, wrist roll/pitch/yaw and
gripper, the antennas: `<joint>.pos` in degrees) and, with the mobile base, `mobile_base.vx`,
`mobile_base.vy` (m/s) and `mobile_base.vtheta` (deg/s): measured odometry in the observation,
the commanded velocity in the action. The `with_*_camera` flags add the head's teleop cameras and
the torso's RGB camera (`reachy2_camera`), beside any `cameras`.

Connecting reaches the SDK server (`ip_address`, `sdk_port`), checks every part in use is there
and answers, turns them on as the SDK does (slow speed limit, on, then full limits as LeRobot's
`reset_default_limits`) and puts the base in velocity mode. Where LeRobot reads the SDK's cached
state forever, rlctl keeps the last good reading through a slow or failed request (said once
per episode) and raises one `HardwareError` naming the part when none came for
`observation_timeout_s`.

Every action passes the guard: joints finite and within +-`max_joint_deg` (each step at most
`max_relative_target` from the present position when set, as LeRobot's
`ensure_safe_goal_position`), the base within the SDK's own caps (`max_xy_velocity`,
`max_rotation_velocity`); a refused action holds the joints at the last safe goal and stops the
base. With `use_external_commands` nothing is sent (another program drives the robot).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.cameras.robot_frames import (
    camera_features,
    connect_cameras,
    read_cameras,
)
from rlctl.adapters.robots.config import Reachy2RobotConfig
from rlctl.adapters.robots.reachy2_link import (
    VELOCITY_NAMES,
    Link,
    Parts,
    PartUnanswered,
)
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import STATE_KEY, action_feature, state_feature
from rlctl.domain.action_guard import ActionGuard, ActionLimits
from rlctl.domain.errors import HardwareError, InvalidInput
from rlctl.domain.features import FeatureSpec

log = structlog.get_logger(__name__)

ROBOT_TYPE = "reachy2"


class Reachy2Robot:
    def __init__(self, config: Reachy2RobotConfig) -> None:
        self.config = config
        self.parts = Parts.of(config)
        self.joints = self.parts.joints()
        self.joint_names = tuple(name for name, *_ in self.joints)
        self.names = self.parts.names()
        self.api_parts = self.parts.api_parts()
        limit = config.max_joint_deg
        n = len(self.joint_names)
        self._joint_guard = ActionGuard(
            ActionLimits(self.joint_names, [-limit] * n, [limit] * n),
            max_step=config.max_relative_target,
        )
        xy, rot = config.max_xy_velocity, config.max_rotation_velocity
        self._base_guard = ActionGuard(
            ActionLimits(VELOCITY_NAMES, [-xy, -xy, -rot], [xy, xy, rot])
        )
        camera_configs = config.all_cameras()
        self._camera_sizes = {
            name: camera.frame_size(name) for name, camera in camera_configs.items()
        }
        self.cameras: dict[str, Camera] = {
            name: camera.build() for name, camera in camera_configs.items()
        }
        self.where = f"{ROBOT_TYPE} {config.ip_address}:{config.sdk_port}"
        self._link: Link | None = None
        self._state = np.zeros(len(self.names), dtype=np.float32)
        self._present: np.ndarray | None = None
        self._good_at = 0.0
        self._warned = False
        self._held_said = False
        self._accepted_at = 0.0
        self._refused = False

    @property
    def robot_type(self) -> str:
        return ROBOT_TYPE

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        features = {STATE_KEY: state_feature(self.names)}
        features.update(camera_features(self.cameras, self._camera_sizes))
        return features

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self.names)}

    @property
    def realtime(self) -> bool:
        return True

    @property
    def is_connected(self) -> bool:
        return self._link is not None

    def connect(self) -> None:
        if self._link is not None:
            return
        config = self.config
        assert config.ip_address is not None  # the config refuses an empty one
        link = Link(config.ip_address, config.sdk_port, config.request_timeout_s, ROBOT_TYPE)
        needed = list(self.api_parts)
        for side in ("l_arm", "r_arm"):
            if side in needed:
                needed.append(f"{side[0]}_hand")
        link.open(config.connect_timeout_s, needed)
        try:
            with link.connecting(config.connect_timeout_s):
                self._read(link)
                link.turn_on(self.api_parts)
        except PartUnanswered as error:
            link.close()
            raise self._unanswered(error, "connecting") from error
        self._link = link
        self._good_at = self._accepted_at = time.monotonic()
        self._joint_guard.forget()
        self._base_guard.forget()
        connect_cameras(self.cameras, self._camera_sizes, release=self.disconnect)

    def _unanswered(self, error: PartUnanswered, doing: str) -> HardwareError:
        assert self.config.ip_address is not None
        return HardwareError(
            f"{error.describe(self.config.ip_address, self.config.sdk_port)} ({doing})",
            where=self.where,
            hint="check the robot's services are up (its dashboard) and the part is on; "
            "a part the robot lacks is left out with its with_* flag set to false",
        )

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []  # the robot's own software holds its calibration

    def reset(self) -> None:
        self._joint_guard.begin_episode()
        self._base_guard.begin_episode()
        self._warned = False
        self._held_said = False

    @property
    def episode_over(self) -> bool:
        return False

    def _read(self, link: Link) -> None:
        state = link.state([p for p in self.api_parts])
        values = link.joint_values(state, self.joints, "present_position")
        if self.parts.mobile_base:
            values.extend(link.odometry())
        wide = np.asarray(values, dtype=np.float64)
        # A value past float32's range is no more finite once stored than NaN is.
        with np.errstate(over="ignore"):
            state = wide.astype(np.float32)
        bad = ~np.isfinite(state)
        if bad.any():
            names = [self.names[i] for i in np.flatnonzero(bad)]
            raise PartUnanswered(", ".join(names), "no finite value in the server's answer")
        self._state = state
        self._present = wide[: len(self.joint_names)]
        self._good_at = time.monotonic()

    def get_observation(self) -> dict[str, Any]:
        link = self._require_connected()
        try:
            self._read(link)
        except PartUnanswered as error:
            silent = time.monotonic() - self._good_at
            if silent > self.config.observation_timeout_s:
                raise HardwareError(
                    f"no reading of the Reachy 2 for {silent:.1f} s: "
                    + error.describe(str(self.config.ip_address), self.config.sdk_port),
                    where=self.where,
                    hint="the robot's SDK server stopped or lost the part; " + link.hint(),
                ) from error
            if not self._warned:
                self._warned = True
                log.warning(
                    f"{error.part}: keeping the last reading",
                    robot=ROBOT_TYPE,
                    reason=str(error),
                    note="said once per episode",
                )
        observation: dict[str, Any] = {STATE_KEY: self._state.copy()}
        observation.update(read_cameras(self.cameras))
        return observation

    def send_action(self, action: np.ndarray) -> np.ndarray:
        link = self._require_connected()
        try:
            values = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            values = np.full(len(self.names), np.nan)
        if values.shape != (len(self.names),):
            raise InvalidInput(
                f"a Reachy 2 action has {len(self.names)} values ({', '.join(self.names)}), "
                f"got {values.size}",
                where=f"{ROBOT_TYPE} action",
            )
        n = len(self.joint_names)
        previous = self._joint_guard.last_safe
        joints = self._joint_guard(values[:n], present=self._present)
        base = self._base_guard(values[n:]) if self.parts.mobile_base else None
        held = joints.held or (base is not None and base.held)
        if held:
            decision = joints if joints.held else base
            assert decision is not None
            if not self._held_said:
                self._held_said = True
                log.warning(
                    "action refused: joints held, base stopped",
                    robot=ROBOT_TYPE,
                    reason=decision.reason,
                    note="said once per episode",
                )
            if not joints.held:
                # The joints passed but the action as a whole is refused: hold the goal that
                # was safe before it (or the present position before any).
                self._joint_guard.forget()
                goal = self._joint_guard.hold_at(
                    previous if previous is not None else self._present
                )
            else:
                goal = joints.values
            velocity: np.ndarray = np.zeros(3, dtype=np.float32)
        else:
            goal = joints.values
            velocity = base.values if base is not None and base.values is not None else np.zeros(0)
        sent = np.concatenate(
            [
                np.asarray(goal if goal is not None else self._state[:n], dtype=np.float32),
                np.asarray(velocity if self.parts.mobile_base else [], dtype=np.float32),
            ]
        )
        if self.config.use_external_commands:
            return sent
        try:
            if goal is not None and n:
                link.send_goals(self.joints, [float(v) for v in goal])
            if self.parts.mobile_base:
                link.send_velocity(*(float(v) for v in sent[n:]))
        except PartUnanswered as error:
            silent = time.monotonic() - self._accepted_at
            if silent > self.config.observation_timeout_s:
                raise HardwareError(
                    f"no command taken by the Reachy 2 for {silent:.1f} s: "
                    + error.describe(str(self.config.ip_address), self.config.sdk_port),
                    where=self.where,
                    hint="the robot's SDK server stopped; " + link.hint(),
                ) from error
            if not self._refused:
                self._refused = True
                log.warning(
                    "a command did not get through",
                    robot=ROBOT_TYPE,
                    part=error.part,
                    reason=str(error),
                    note="said once until one does",
                )
            return sent
        self._refused = False
        self._accepted_at = time.monotonic()
        return sent

    def disconnect(self) -> None:
        """Stop the base, turn the motors off when `disable_torque_on_disconnect`, close;
        safe twice."""
        for camera in self.cameras.values():
            if camera.is_connected:
                try:
                    camera.disconnect()
                except Exception as error:
                    log.warning("camera did not close", camera=camera.name, error=str(error))
        link, self._link = self._link, None
        if link is None:
            return
        try:
            if self.parts.mobile_base and not self.config.use_external_commands:
                link.send_velocity(0.0, 0.0, 0.0)
            if self.config.disable_torque_on_disconnect:
                link.turn_off_smoothly(self.api_parts)
        except PartUnanswered as error:
            log.warning(
                "the Reachy 2 could not be stopped on disconnect",
                robot=ROBOT_TYPE,
                part=error.part,
                reason=str(error),
            )
        finally:
            link.close()

    def _require_connected(self) -> Link:
        if self._link is None:
            raise HardwareError(
                "the Reachy 2 is not connected", where=self.where, hint="connect it first"
            )
        return self._link


def reachy2(
    config: Reachy2RobotConfig, *, calibration_store: CalibrationStore | None = None
) -> Reachy2Robot:
    return Reachy2Robot(config)
