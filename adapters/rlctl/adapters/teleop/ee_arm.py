"""An end-effector teleoperator (`gamepad`, `keyboard_ee`) driving a joint-space arm, as LeRobot
0.6.1 wires one (lerobot/rl/gym_manipulator.py, its `processor.inverse_kinematics` settings):

    {delta_x, delta_y, delta_z, gripper}
      -> MapDeltaActionToRobotActionStep
      -> EEReferenceAndDelta (from the last inverse kinematics solution, not latched)
      -> EEBoundsAndSafety
      -> GripperVelocityToJoint (discrete: 0 close, 1 stay, 2 open; up to max_gripper_pos)
      -> InverseKinematicsEEToJoints (from the last solution) -> {<motor>.pos}

The same steps as the phone's (`rlctl.adapters.kinematics.ee_steps`). The teleoperator then
gives the arm's joint goals, which the robot's safety guard checks as any action. While no
stick or key is held, the last target is held (the arm stays).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rlctl.adapters.kinematics.ee_steps import (
    DELTA_KEYS,
    EEBoundsAndSafety,
    EEReferenceAndDelta,
    EEToJointsPipeline,
    GripperVelocityToJoint,
    InverseKinematicsEEToJoints,
    MapDeltaActionToRobotActionStep,
)
from rlctl.adapters.kinematics.robot_kinematics import RobotKinematics
from rlctl.adapters.teleop.end_effector import GripperAction
from rlctl.application.ports.robot import ACTION_KEY
from rlctl.application.robot_features import STATE_KEY, action_feature
from rlctl.domain.errors import HardwareError, InvalidInput

if TYPE_CHECKING:
    from rlctl.adapters.teleop.config import EndEffectorToJointsConfig
    from rlctl.application.ports.robot import CalibrationTarget
    from rlctl.domain.features import FeatureSpec


def joints_from_state(
    observation: Mapping[str, Any], motors: Sequence[str], who: str, where: str
) -> dict[str, float]:
    """The robot's joints `{<motor>.pos: degrees}` from its `observation.state`."""
    state = observation.get(STATE_KEY)
    values = None if state is None else np.asarray(state, dtype=float).reshape(-1)
    if values is None or values.size != len(motors):
        raise InvalidInput(
            f"{who} needs the robot's {len(motors)} joints in {STATE_KEY}, got "
            + ("none" if values is None else f"{values.size} values"),
            where=where,
            hint=f"use it with an arm whose motors are --teleop.motor_names ({', '.join(motors)})",
        )
    return {f"{name}.pos": float(v) for name, v in zip(motors, values, strict=True)}


class EndEffectorTeleop(Protocol):
    """What is used of the gamepad and keyboard_ee teleoperators."""

    @property
    def teleop_type(self) -> str: ...

    @property
    def action_features(self) -> Mapping[str, FeatureSpec]: ...

    @property
    def is_connected(self) -> bool: ...

    def connect(self) -> None: ...

    def reset(self) -> None: ...

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray: ...

    def events(self) -> dict[str, bool]: ...

    def disconnect(self) -> None: ...


def ee_to_joints_steps(
    config: EndEffectorToJointsConfig, kinematics: RobotKinematics
) -> EEToJointsPipeline:
    """LeRobot's gym_manipulator steps for an end-effector teleoperator on a joint-space arm."""
    motors = list(config.motor_names)
    sx, sy, sz = config.end_effector_step_sizes
    return EEToJointsPipeline(
        [
            MapDeltaActionToRobotActionStep(),
            EEReferenceAndDelta(
                kinematics,
                {"x": sx, "y": sy, "z": sz},
                motors,
                use_latched_reference=False,
                use_ik_solution=True,
            ),
            EEBoundsAndSafety(
                {
                    "min": list(config.end_effector_bounds_min),
                    "max": list(config.end_effector_bounds_max),
                },
                max_ee_step_m=config.max_ee_step_m,
            ),
            GripperVelocityToJoint(
                motors, speed_factor=1.0, clip_max=config.max_gripper_pos, discrete_gripper=True
            ),
            InverseKinematicsEEToJoints(kinematics, motors, initial_guess_current_joints=False),
        ]
    )


class EndEffectorArm:
    """`inner`'s end-effector deltas turned into the arm's joint goals, on the arm's URDF."""

    def __init__(self, inner: EndEffectorTeleop, config: EndEffectorToJointsConfig) -> None:
        assert config.urdf_path is not None
        self._inner = inner
        self._motors = list(config.motor_names)
        self._where = f"teleop.type={inner.teleop_type}"
        names = list(inner.action_features[ACTION_KEY].names or [])
        self._use_gripper = "gripper" in names
        self._kinematics = RobotKinematics(
            config.urdf_path, target_frame_name=config.target_frame_name, joint_names=self._motors
        )
        self._steps = ee_to_joints_steps(config, self._kinematics)

    @property
    def teleop_type(self) -> str:
        return self._inner.teleop_type

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(f"{name}.pos" for name in self._motors)}

    @property
    def is_connected(self) -> bool:
        return self._inner.is_connected

    @property
    def inner(self) -> EndEffectorTeleop:
        return self._inner

    def connect(self) -> None:
        self._inner.connect()

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        self._inner.reset()
        self._steps.reset()

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        if not self.is_connected:
            raise HardwareError(
                f"the {self.teleop_type} teleoperator is not connected",
                where=self._where,
                hint="connect the teleoperator first",
            )
        joints = joints_from_state(
            observation, self._motors, f"the {self.teleop_type}", self._where
        )
        values = np.asarray(self._inner.get_action(observation), dtype=float).reshape(-1)
        action: dict[str, Any] = dict(zip(DELTA_KEYS, values[:3].tolist(), strict=True))
        action["gripper"] = float(values[3]) if self._use_gripper else float(GripperAction.STAY)
        action = self._steps(action, joints)
        return np.asarray([action[f"{name}.pos"] for name in self._motors], dtype=np.float32)

    def events(self) -> dict[str, bool]:
        return self._inner.events()

    def disconnect(self) -> None:
        self._inner.disconnect()
