"""LeRobot 0.6.1's end-effector processor steps (lerobot/robots/so_follower/
robot_kinematic_processor.py, lerobot/processor/delta_action_processor.py), same names, same
keys, same arithmetic:

    {delta_x, delta_y, delta_z, gripper}          (gamepad, keyboard_ee)
      -> MapDeltaActionToRobotActionStep  (phone: its own mapping step)
    {enabled, target_x..target_wz, gripper_vel}   (a teleoperator's relative command)
      -> EEReferenceAndDelta     -> {ee.x, ee.y, ee.z, ee.wx, ee.wy, ee.wz, ee.gripper_vel}
      -> EEBoundsAndSafety       (position clipped to the workspace, step rate-limited)
      -> GripperVelocityToJoint  -> ee.gripper_pos
      -> InverseKinematicsEEToJoints -> {<motor>.pos}  (joint goals, degrees)

and the other way, `ForwardKinematicsJointsToEEObservation` / `...Action` / `...ToEE`: the
joints `<motor>.pos` replaced by the pose `ee.x, ee.y, ee.z, ee.wx, ee.wy, ee.wz,
ee.gripper_pos` (metres, a rotation vector in radians, the gripper's value).

Each step takes the action (a dict) and the robot's joints (`{"<motor>.pos": degrees}`, the
robot's order, the gripper last) and returns the new action. Unlike LeRobot's, a missing key, a
missing joint or a non-finite value raises one `InvalidInput` that names it; and the position
jump check rate-limits by default (LeRobot's `raise_on_jump=False`), since an exception in
teleoperation would leave the arm uncommanded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np
from scipy.spatial.transform import Rotation

from rlctl.domain.errors import InvalidInput

logger = logging.getLogger(__name__)

TARGET_KEYS = ("target_x", "target_y", "target_z", "target_wx", "target_wy", "target_wz")
EE_POSE_KEYS = ("ee.x", "ee.y", "ee.z", "ee.wx", "ee.wy", "ee.wz")
EE_FEATURE_KEYS = (*EE_POSE_KEYS, "ee.gripper_pos")
DELTA_KEYS = ("delta_x", "delta_y", "delta_z")


class Kinematics(Protocol):
    """What the steps use of `RobotKinematics` (a stand-in in tests)."""

    @property
    def joint_names(self) -> Sequence[str]: ...

    def forward_kinematics(self, joint_pos_deg: np.ndarray) -> np.ndarray: ...

    def inverse_kinematics(
        self,
        current_joint_pos: np.ndarray,
        desired_ee_pose: np.ndarray,
        position_weight: float = 1.0,
        orientation_weight: float = 0.01,
    ) -> np.ndarray: ...


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
class MapDeltaActionToRobotActionStep:
    """LeRobot's step from an end-effector teleoperator's deltas (`delta_x/y/z`, `gripper`:
    0 close, 1 stay, 2 open) to a relative command: enabled while the deltas' norm is above
    `noise_threshold`, the deltas scaled by `position_scale`, no rotation, the gripper command
    as `gripper_vel` (for `GripperVelocityToJoint(discrete_gripper=True)`)."""

    position_scale: float = 1.0
    noise_threshold: float = 1e-3

    def action(self, action: dict[str, Any], observation: Mapping[str, Any]) -> dict[str, Any]:
        step = "MapDeltaActionToRobotActionStep"
        dx, dy, dz = _take(action, DELTA_KEYS, step)
        (gripper,) = _take(action, ("gripper",), step)
        enabled = float(np.sqrt(dx * dx + dy * dy + dz * dz)) > self.noise_threshold
        scale = self.position_scale
        return {
            "enabled": enabled,
            "target_x": dx * scale,
            "target_y": dy * scale,
            "target_z": dz * scale,
            "target_wx": 0.0,
            "target_wy": 0.0,
            "target_wz": 0.0,
            "gripper_vel": gripper,
        }

    def reset(self) -> None:
        pass


@attrs.define
class EEReferenceAndDelta:
    """The target pose: a reference pose (latched at the rising edge of `enabled`, or the current
    one) moved by the scaled `target_x/y/z` and turned by the rotation vector `target_w*`; while
    disabled, the last command is held (at first, the pose where the arm is).
    `use_ik_solution`: the current pose is that of the last inverse kinematics solution, when
    one is given (`ik_solution`), rather than of the measured joints (LeRobot's HIL-SERL and
    end-effector teleoperation: the target does not sag with the arm)."""

    kinematics: Kinematics
    end_effector_step_sizes: Mapping[str, float]
    motor_names: Sequence[str]
    use_latched_reference: bool = True
    use_ik_solution: bool = False
    reference_ee_pose: np.ndarray | None = attrs.field(default=None, init=False)
    _prev_enabled: bool = attrs.field(default=False, init=False)
    _command_when_disabled: np.ndarray | None = attrs.field(default=None, init=False)

    def action(
        self,
        action: dict[str, Any],
        observation: Mapping[str, Any],
        ik_solution: np.ndarray | None = None,
    ) -> dict[str, Any]:
        step = "EEReferenceAndDelta"
        if self.use_ik_solution and ik_solution is not None:
            q = np.asarray(ik_solution, dtype=float)
        else:
            known = self.kinematics.joint_names
            names = [n for n in self.motor_names if n in known] or list(self.motor_names)
            q = joints_of(observation, names, step)
        t_curr = self.kinematics.forward_kinematics(q)
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

    kinematics: Kinematics
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


def forward_kinematics_joints_to_ee(
    joints: Mapping[str, Any], kinematics: Kinematics, motor_names: Sequence[str], step: str
) -> dict[str, Any]:
    """LeRobot's `compute_forward_kinematics_joints_to_ee`: the motors' `<motor>.pos` replaced
    by the end effector's pose and `ee.gripper_pos` (the `gripper.pos` given); other keys kept.
    A new dict (LeRobot's changes the one given)."""
    q = joints_of(joints, motor_names, step)
    if "gripper.pos" not in joints:
        raise InvalidInput(
            f"{step} needs gripper.pos (the gripper's value becomes ee.gripper_pos)",
            where=step,
            hint="list the gripper among motor_names, or give it in the joints",
        )
    gripper_pos = float(joints["gripper.pos"])
    if not np.isfinite(gripper_pos):
        raise InvalidInput(f"{step}: gripper.pos is not finite ({gripper_pos})", where=step)
    pose = np.asarray(kinematics.forward_kinematics(q), dtype=float)
    if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
        raise InvalidInput(
            f"{step}: forward kinematics gave no finite 4x4 pose at {q.tolist()}", where=step
        )
    rotvec = Rotation.from_matrix(pose[:3, :3]).as_rotvec()
    out = {k: v for k, v in joints.items() if k not in {f"{n}.pos" for n in motor_names}}
    for key, value in zip(EE_POSE_KEYS, [*pose[:3, 3], *rotvec], strict=True):
        out[key] = float(value)
    out["ee.gripper_pos"] = gripper_pos
    return out


def ee_feature_names(names: Sequence[str], motor_names: Sequence[str]) -> list[str]:
    """The features after a forward kinematics step (LeRobot's `transform_features`): the
    motors' `<motor>.pos` out, `ee.x ... ee.gripper_pos` appended."""
    joints = {f"{n}.pos" for n in motor_names}
    kept = [n for n in names if n not in joints and n not in EE_FEATURE_KEYS]
    return [*kept, *EE_FEATURE_KEYS]


@attrs.define
class ForwardKinematicsJointsToEEObservation:
    """LeRobot's observation step: the robot's joints to the end effector's pose (to record or
    show the pose, or to give it to a policy)."""

    kinematics: Kinematics
    motor_names: Sequence[str]

    def observation(self, observation: Mapping[str, Any]) -> dict[str, Any]:
        return forward_kinematics_joints_to_ee(
            observation, self.kinematics, self.motor_names, "ForwardKinematicsJointsToEEObservation"
        )

    def feature_names(self, names: Sequence[str]) -> list[str]:
        return ee_feature_names(names, self.motor_names)

    def reset(self) -> None:
        pass


@attrs.define
class ForwardKinematicsJointsToEEAction:
    """LeRobot's action step: joint goals to the end-effector pose they reach (an arm's
    actions recorded as end-effector actions)."""

    kinematics: Kinematics
    motor_names: Sequence[str]

    def action(self, action: dict[str, Any], observation: Mapping[str, Any]) -> dict[str, Any]:
        return forward_kinematics_joints_to_ee(
            action, self.kinematics, self.motor_names, "ForwardKinematicsJointsToEEAction"
        )

    def feature_names(self, names: Sequence[str]) -> list[str]:
        return ee_feature_names(names, self.motor_names)

    def reset(self) -> None:
        pass


@attrs.define
class ForwardKinematicsJointsToEE:
    """LeRobot's step on both: the action's joints, when there is an action, and the
    observation's, when there is an observation."""

    kinematics: Kinematics
    motor_names: Sequence[str]

    _on_action: ForwardKinematicsJointsToEEAction = attrs.field(init=False)
    _on_observation: ForwardKinematicsJointsToEEObservation = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._on_action = ForwardKinematicsJointsToEEAction(self.kinematics, self.motor_names)
        self._on_observation = ForwardKinematicsJointsToEEObservation(
            self.kinematics, self.motor_names
        )

    def __call__(
        self, action: Mapping[str, Any] | None, observation: Mapping[str, Any] | None
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        new_action = None if action is None else self._on_action.action(dict(action), {})
        new_observation = (
            None if observation is None else self._on_observation.observation(observation)
        )
        return new_action, new_observation

    def feature_names(self, names: Sequence[str]) -> list[str]:
        return ee_feature_names(names, self.motor_names)

    def reset(self) -> None:
        pass


@attrs.define
class EEToJointsPipeline:
    """Action steps run in order on the robot's joints; the last inverse kinematics solution is
    handed to `EEReferenceAndDelta` on the next tick (LeRobot passes it in the transition's
    complementary data, `IK_solution`)."""

    steps: list[Any]
    ik_solution: np.ndarray | None = attrs.field(default=None, init=False)

    def __call__(self, action: dict[str, Any], joints: Mapping[str, Any]) -> dict[str, Any]:
        for step in self.steps:
            if isinstance(step, EEReferenceAndDelta):
                action = step.action(action, joints, ik_solution=self.ik_solution)
            else:
                action = step.action(action, joints)
            if isinstance(step, InverseKinematicsEEToJoints):
                self.ik_solution = None if step.q_curr is None else step.q_curr.copy()
        return action

    def reset(self) -> None:
        self.ik_solution = None
        for step in self.steps:
            step.reset()
