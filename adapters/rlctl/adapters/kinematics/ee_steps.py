"""LeRobot 0.6.1's end-effector processor steps (lerobot/robots/so_follower/
robot_kinematic_processor.py), same names, same keys, same arithmetic:

    {enabled, target_x..target_wz, gripper_vel}   (a teleoperator's relative command)
      -> EEReferenceAndDelta     -> {ee.x, ee.y, ee.z, ee.wx, ee.wy, ee.wz, ee.gripper_vel}
      -> EEBoundsAndSafety       (position clipped to the workspace, step rate-limited)
      -> GripperVelocityToJoint  -> ee.gripper_pos
      -> InverseKinematicsEEToJoints -> {<motor>.pos}  (joint goals, degrees)

Each step takes the action (a dict) and the robot's joints (`{"<motor>.pos": degrees}`, the
robot's order, the gripper last) and returns the new action. Unlike LeRobot's, a missing key, a
missing joint or a non-finite value raises one `InvalidInput` that names it; and the position
jump check rate-limits by default (LeRobot's `raise_on_jump=False`), since an exception in
teleoperation would leave the arm uncommanded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from scipy.spatial.transform import Rotation

from rlctl.adapters.kinematics.robot_kinematics import RobotKinematics
from rlctl.domain.errors import InvalidInput

logger = logging.getLogger(__name__)

TARGET_KEYS = ("target_x", "target_y", "target_z", "target_wx", "target_wy", "target_wz")
EE_POSE_KEYS = ("ee.x", "ee.y", "ee.z", "ee.wx", "ee.wy", "ee.wz")


def _take(action: dict[str, Any], keys: Sequence[str], step: str) -> list[float]:
    missing = [key for key in keys if action.get(key) is None]
    if missing:
        raise InvalidInput(
            f"{step} needs {', '.join(missing)} in the action",
            where=step,
            hint="put the steps in LeRobot's order: map the teleoperator's action, "
            "EEReferenceAndDelta, EEBoundsAndSafety, GripperVelocityToJoint, "
            "InverseKinematicsEEToJoints",
        )
    values = [float(action.pop(key)) for key in keys]
    if not np.all(np.isfinite(values)):
        raise InvalidInput(
            f"{step}: {dict(zip(keys, values, strict=True))} is not finite", where=step
        )
    return values


def joints_of(observation: Mapping[str, Any], motor_names: Sequence[str], step: str) -> np.ndarray:
    """The joints `<motor>.pos` of `motor_names`, in that order (degrees)."""
    missing = [name for name in motor_names if f"{name}.pos" not in observation]
    if missing:
        raise InvalidInput(
            f"{step} needs the robot's joints {', '.join(f'{n}.pos' for n in missing)}",
            where=step,
            hint=f"the observation has {', '.join(map(str, observation)) or 'nothing'}",
        )
    q = np.array([float(observation[f"{name}.pos"]) for name in motor_names], dtype=float)
    if not np.all(np.isfinite(q)):
        raise InvalidInput(f"{step}: the robot's joints are not finite: {q.tolist()}", where=step)
    return q


def pose_matrix(position: Sequence[float], rotvec: Sequence[float]) -> np.ndarray:
    pose = np.eye(4, dtype=float)
    pose[:3, :3] = Rotation.from_rotvec(np.asarray(rotvec, dtype=float)).as_matrix()
    pose[:3, 3] = np.asarray(position, dtype=float)
    return pose


@attrs.define
class EEReferenceAndDelta:
    """The target pose: a reference pose (latched at the rising edge of `enabled`, or the current
    one) moved by the scaled `target_x/y/z` and turned by the rotation vector `target_w*`; while
    disabled, the last command is held (at first, the pose where the arm is)."""

    kinematics: RobotKinematics
    end_effector_step_sizes: Mapping[str, float]
    motor_names: Sequence[str]
    use_latched_reference: bool = True
    reference_ee_pose: np.ndarray | None = attrs.field(default=None, init=False)
    _prev_enabled: bool = attrs.field(default=False, init=False)
    _command_when_disabled: np.ndarray | None = attrs.field(default=None, init=False)

    def action(self, action: dict[str, Any], observation: Mapping[str, Any]) -> dict[str, Any]:
        step = "EEReferenceAndDelta"
        names = [n for n in self.motor_names if n in self.kinematics.joint_names] or list(
            self.motor_names
        )
        t_curr = self.kinematics.forward_kinematics(joints_of(observation, names, step))
        if "enabled" not in action:
            raise InvalidInput(f"{step} needs enabled in the action", where=step)
        enabled = bool(action.pop("enabled"))
        tx, ty, tz, wx, wy, wz = _take(action, TARGET_KEYS, step)
        (gripper_vel,) = _take(action, ("gripper_vel",), step)
        if enabled:
            ref = t_curr
            if self.use_latched_reference:
                if not self._prev_enabled or self.reference_ee_pose is None:
                    self.reference_ee_pose = t_curr.copy()
                ref = self.reference_ee_pose
            sizes = self.end_effector_step_sizes
            delta_p = np.array([tx * sizes["x"], ty * sizes["y"], tz * sizes["z"]], dtype=float)
            desired = np.eye(4, dtype=float)
            desired[:3, :3] = ref[:3, :3] @ Rotation.from_rotvec([wx, wy, wz]).as_matrix()
            desired[:3, 3] = ref[:3, 3] + delta_p
            self._command_when_disabled = desired.copy()
        else:
            if self._command_when_disabled is None:
                self._command_when_disabled = t_curr.copy()
            desired = self._command_when_disabled.copy()
        rotvec = Rotation.from_matrix(desired[:3, :3]).as_rotvec()
        for key, value in zip(EE_POSE_KEYS, [*desired[:3, 3], *rotvec], strict=True):
            action[key] = float(value)
        action["ee.gripper_vel"] = gripper_vel
        self._prev_enabled = enabled
        return action

    def reset(self) -> None:
        self._prev_enabled = False
        self.reference_ee_pose = None
        self._command_when_disabled = None


@attrs.define
class EEBoundsAndSafety:
    """The target position clipped to `end_effector_bounds` ({"min": xyz, "max": xyz}) and its step
    from the last one limited to `max_ee_step_m` (rate-limited with a warning, or raised)."""

    end_effector_bounds: Mapping[str, Sequence[float]]
    max_ee_step_m: float = 0.05
    raise_on_jump: bool = False
    _last_pos: np.ndarray | None = attrs.field(default=None, init=False)

    def action(self, action: dict[str, Any], observation: Mapping[str, Any]) -> dict[str, Any]:
        step = "EEBoundsAndSafety"
        x, y, z, wx, wy, wz = _take(action, EE_POSE_KEYS, step)
        pos = np.clip(
            np.array([x, y, z], dtype=float),
            np.asarray(self.end_effector_bounds["min"], dtype=float),
            np.asarray(self.end_effector_bounds["max"], dtype=float),
        )
        if self._last_pos is not None:
            dpos = pos - self._last_pos
            n = float(np.linalg.norm(dpos))
            if n > self.max_ee_step_m:
                pos = self._last_pos + dpos * (self.max_ee_step_m / n)
                if self.raise_on_jump:
                    raise InvalidInput(
                        f"the end-effector target jumps {n:.3f} m in one step "
                        f"(limit {self.max_ee_step_m} m)",
                        where=step,
                        hint="move the phone more slowly, or raise max_ee_step_m",
                    )
                logger.warning(
                    "EE jump %.3fm > %.3fm; rate-limited to the per-frame step",
                    n,
                    self.max_ee_step_m,
                )
        self._last_pos = pos
        for key, value in zip(EE_POSE_KEYS, [*pos, wx, wy, wz], strict=True):
            action[key] = float(value)
        return action

    def reset(self) -> None:
        self._last_pos = None


@attrs.define
class GripperVelocityToJoint:
    """`ee.gripper_vel` integrated from the robot's gripper joint (the last one) into
    `ee.gripper_pos`, clipped to [clip_min, clip_max]; `discrete_gripper`: 0 close, 1 stay,
    2 open."""

    motor_names: Sequence[str]
    speed_factor: float = 20.0
    clip_min: float = 0.0
    clip_max: float = 100.0
    discrete_gripper: bool = False

    def action(self, action: dict[str, Any], observation: Mapping[str, Any]) -> dict[str, Any]:
        step = "GripperVelocityToJoint"
        (gripper_vel,) = _take(action, ("ee.gripper_vel",), step)
        q = joints_of(observation, self.motor_names, step)
        if self.discrete_gripper:
            gripper_vel = -(gripper_vel - 1) * self.clip_max
        delta = gripper_vel * float(self.speed_factor)
        action["ee.gripper_pos"] = float(np.clip(q[-1] + delta, self.clip_min, self.clip_max))
        return action

    def reset(self) -> None:
        pass


@attrs.define
class InverseKinematicsEEToJoints:
    """`ee.*` to joint goals `<motor>.pos` by inverse kinematics from the robot's joints (or the
    last solution); the gripper's goal is `ee.gripper_pos`."""

    kinematics: RobotKinematics
    motor_names: Sequence[str]
    initial_guess_current_joints: bool = True
    orientation_weight: float = 0.01
    q_curr: np.ndarray | None = attrs.field(default=None, init=False)

    def action(self, action: dict[str, Any], observation: Mapping[str, Any]) -> dict[str, Any]:
        step = "InverseKinematicsEEToJoints"
        x, y, z, wx, wy, wz = _take(action, EE_POSE_KEYS, step)
        (gripper_pos,) = _take(action, ("ee.gripper_pos",), step)
        q_raw = joints_of(observation, self.motor_names, step)
        if self.initial_guess_current_joints or self.q_curr is None:
            self.q_curr = q_raw
        q_target = self.kinematics.inverse_kinematics(
            self.q_curr,
            pose_matrix([x, y, z], [wx, wy, wz]),
            orientation_weight=self.orientation_weight,
        )
        self.q_curr = q_target
        for i, name in enumerate(self.motor_names):
            action[f"{name}.pos"] = float(gripper_pos) if name == "gripper" else float(q_target[i])
        return action

    def reset(self) -> None:
        self.q_curr = None
