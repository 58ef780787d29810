"""Two arms as one robot, as LeRobot's bimanual robots are: `left_*` then `right_*`.

The joints are one vector, the left arm's then the right's (`left_shoulder_pan.pos`, …,
`right_gripper.pos`); an arm's cameras are `left_<name>` / `right_<name>`, the robot's own cameras
keep their names. Each half of an action passes its own arm's `ActionGuard` (its calibrated
ranges, its `max_relative_target`), so garbage in one half never moves a motor of either arm
outside its range. Whatever an arm raises names its side: `left arm, /dev/ttyACM0: motor
'elbow_flex' (id 3) sent no status packet ...`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs
import numpy as np

from rlctl.adapters.cameras.robot_frames import (
    camera_features,
    check_frame_sizes,
    located,
    read_cameras,
)
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import ACTION_KEY, CalibrationTarget, Robot
from rlctl.application.robot_features import (
    IMAGES_PREFIX,
    STATE_KEY,
    action_feature,
    state_feature,
)
from rlctl.domain.errors import ConfigError, InvalidInput, RlctlError
from rlctl.domain.features import FeatureSpec

Side = Literal["left", "right"]
SIDES: tuple[Side, Side] = ("left", "right")


@contextlib.contextmanager
def on_side(side: str) -> Iterator[None]:
    try:
        yield
    except RlctlError as error:
        raise located(error, f"{side} arm") from error


def prefixed(side: str, names: Sequence[str] | None) -> list[str]:
    return [f"{side}_{name}" for name in names or ()]


def require_bimanual_id(device_id: str | None, flag: str) -> str:
    """LeRobot names both arms' calibration files `None.json` when the id is unset, so the second
    arm calibrated overwrites the first: refused here."""
    if not device_id:
        raise ConfigError(
            "a bimanual device needs an id: its arms are calibrated as <id>_left and <id>_right",
            where=f"{flag}.id",
            hint=f"add --{flag}.id=NAME (the one used to calibrate it)",
        )
    return device_id


def require_two_ports(left: str, right: str, flag: str) -> None:
    if left == right:
        raise ConfigError(
            f"both arms are given the port {left!r}",
            where=f"{flag}.right_arm_config.port",
            hint="each arm has its own motors board: `rlctl find-port` tells which is which",
        )


class BimanualFollower:
    def __init__(
        self,
        left: Robot,
        right: Robot,
        cameras: Mapping[str, Camera],
        camera_sizes: Mapping[str, tuple[int, int]],
        *,
        robot_type: str,
    ) -> None:
        """`cameras`: the robot's own (names kept); each arm has its cameras (names prefixed).
        `camera_sizes`: (height, width) per own camera, as configured."""
        self.arms: dict[Side, Robot] = {"left": left, "right": right}
        self._cameras = dict(cameras)
        self._sizes = dict(camera_sizes)
        self._robot_type = robot_type
        self._split = len(left.action_features[ACTION_KEY].names or ())
        self._camera_keys = self._name_cameras()

    def _name_cameras(self) -> dict[str, tuple[Side | None, str]]:
        """Dataset key -> (side or None for the robot's own, the camera's own key)."""
        keys: dict[str, tuple[Side | None, str]] = {}
        per_arm = {
            side: [k for k in arm.observation_features if k.startswith(IMAGES_PREFIX)]
            for side, arm in self.arms.items()
        }
        own = list(camera_features(self._cameras, self._sizes))
        # LeRobot's order: the left arm's cameras, the robot's own, the right arm's.
        entries: list[tuple[str, Side | None, str]] = [
            (f"{IMAGES_PREFIX}left_{k[len(IMAGES_PREFIX) :]}", "left", k) for k in per_arm["left"]
        ]
        entries += [(k, None, k) for k in own]
        entries += [
            (f"{IMAGES_PREFIX}right_{k[len(IMAGES_PREFIX) :]}", "right", k)
            for k in per_arm["right"]
        ]
        arm_names = {k[len(IMAGES_PREFIX) :] for side in SIDES for k in per_arm[side]}
        for key, side, source in entries:
            name = key[len(IMAGES_PREFIX) :]
            if key in keys or (side is None and name in arm_names):
                raise ConfigError(
                    f"camera name {name!r} is used twice (the robot's own cameras keep their "
                    "names, an arm's are prefixed left_/right_)",
                    where="cameras",
                    hint="rename one of the cameras",
                )
            keys[key] = (side, source)
        return keys

    @property
    def robot_type(self) -> str:
        return self._robot_type

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        features = {STATE_KEY: state_feature(self._joint_names(STATE_KEY, observation=True))}
        own = camera_features(self._cameras, self._sizes)
        for key, (side, source) in self._camera_keys.items():
            spec = own[source] if side is None else self.arms[side].observation_features[source]
            features[key] = attrs.evolve(spec, key=key)
        return features

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self._joint_names(ACTION_KEY, observation=False))}

    def _joint_names(self, key: str, *, observation: bool) -> list[str]:
        names: list[str] = []
        for side, arm in self.arms.items():
            features = arm.observation_features if observation else arm.action_features
            names += prefixed(side, features[key].names)
        return names

    @property
    def realtime(self) -> bool:
        return True

    @property
    def is_connected(self) -> bool:
        return all(arm.is_connected for arm in self.arms.values()) and all(
            c.is_connected for c in self._cameras.values()
        )

    def connect(self) -> None:
        try:
            for side, arm in self.arms.items():
                with on_side(side):
                    arm.connect()
            for camera in self._cameras.values():
                camera.connect()
            check_frame_sizes(self._cameras, self._sizes)
        except BaseException:
            self._release()
            raise

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [target for arm in self.arms.values() for target in arm.calibration_targets()]

    def reset(self) -> None:
        for arm in self.arms.values():
            arm.reset()

    @property
    def episode_over(self) -> bool:
        return False

    def get_observation(self) -> dict[str, Any]:
        per_arm: dict[str, dict[str, Any]] = {}
        for side, arm in self.arms.items():
            with on_side(side):
                per_arm[side] = arm.get_observation()
        observation: dict[str, Any] = {
            STATE_KEY: np.concatenate([per_arm[side][STATE_KEY] for side in SIDES])
        }
        own = read_cameras(self._cameras)
        for key, (camera_side, source) in self._camera_keys.items():
            observation[key] = own[source] if camera_side is None else per_arm[camera_side][source]
        return observation

    def send_action(self, action: np.ndarray) -> np.ndarray:
        halves = self._halves(action)
        sent = []
        for (side, arm), half in zip(self.arms.items(), halves, strict=True):
            with on_side(side):
                sent.append(np.asarray(arm.send_action(half), dtype=np.float32))
        return np.concatenate(sent)

    def _halves(self, action: Any) -> tuple[Any, Any]:
        try:
            values = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            return action, action  # not numbers: each arm's guard refuses it and holds
        names = self.action_features[ACTION_KEY].names or []
        if values.shape[0] != len(names):
            raise InvalidInput(
                f"an action has {values.shape[0]} values, the robot takes {len(names)} "
                f"({', '.join(names)})",
                where="action",
            )
        return values[: self._split], values[self._split :]

    def disconnect(self) -> None:
        errors = self._release()
        if errors:
            raise errors[0]

    def _release(self) -> list[BaseException]:
        """Let go of every arm and camera, even when one fails; the failures, named by side."""
        errors: list[BaseException] = []
        for side, arm in self.arms.items():
            try:
                with on_side(side):
                    arm.disconnect()
            except Exception as error:
                errors.append(error)
        for camera in self._cameras.values():
            try:
                camera.disconnect()
            except Exception as error:
                errors.append(error)
        return errors
