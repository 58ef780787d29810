"""LeRobot 0.6.1's `RobotKinematics` (lerobot/model/kinematics.py), same calls, joints in degrees:

    kin = RobotKinematics("so101.urdf", target_frame_name="gripper_frame_link",
                          joint_names=["shoulder_pan", "shoulder_lift", ...])
    pose = kin.forward_kinematics(q_deg)           # 4x4, metres, in the base link's frame
    q = kin.inverse_kinematics(q_deg, desired_4x4) # one solver step from q, as LeRobot's

LeRobot solves on placo; placo's wheels pin numpy to one minor version (2.3, through their
boost), which rlctl cannot take, so this is rlctl's own in numpy: the URDF's chain (revolute,
continuous, prismatic and fixed joints, their origins and axes) from the root link to the target
frame (a link or a joint), and inverse kinematics as placo's soft frame task does it: one
weighted, damped Gauss-Newton step on the position and orientation errors, then the joints'
limits. Joint values past `joint_names` (a gripper) pass through unchanged, as in LeRobot.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import attrs
import numpy as np

from rlctl.domain.errors import ConfigError, InvalidInput

MOVABLE = ("revolute", "continuous", "prismatic")
# The regularisation of the step (a small joint regularisation, as placo's solver has): it
# keeps the step finite at a singular pose and leaves joints off the chain where they are.
DAMPING = 1e-6


@attrs.frozen
class _Joint:
    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray  # 4x4
    axis: np.ndarray  # unit, in the child's frame
    lower: float
    upper: float


def _floats(text: str | None, n: int, default: float, where: str) -> list[float]:
    if text is None:
        return [default] * n
    try:
        values = [float(v) for v in text.split()]
    except ValueError:
        values = []
    if len(values) != n or not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{where}: {text!r} is not {n} numbers", where="urdf_path")
    return values


def _rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = (
        math.cos(roll),
        math.sin(roll),
        math.cos(pitch),
        math.sin(pitch),
        math.cos(yaw),
        math.sin(yaw),
    )
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + s * k + (1 - c) * (k @ k)


def _log_rotation(r: np.ndarray) -> np.ndarray:
    """The rotation vector of a rotation matrix."""
    cos = max(-1.0, min(1.0, (np.trace(r) - 1) / 2))
    angle = math.acos(cos)
    w = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    if angle < 1e-9:
        return w / 2
    if math.pi - angle < 1e-6:  # near a half turn: the axis from the symmetric part
        axis = np.sqrt(np.clip((np.diag(r) + 1) / 2, 0, None))
        i = int(np.argmax(axis))
        axis[(i + 1) % 3] = math.copysign(axis[(i + 1) % 3], r[i, (i + 1) % 3])
        axis[(i + 2) % 3] = math.copysign(axis[(i + 2) % 3], r[i, (i + 2) % 3])
        return axis / np.linalg.norm(axis) * angle
    return w * angle / (2 * math.sin(angle))


def _parse(path: Path) -> tuple[str, list[_Joint]]:
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as error:
        raise ConfigError(
            f"cannot load the URDF {path}: {error}",
            where="urdf_path",
            hint="check that the file is a valid URDF",
        ) from error
    links = [link.get("name", "") for link in root.findall("link")]
    joints: list[_Joint] = []
    for element in root.findall("joint"):
        name, kind = element.get("name", ""), element.get("type", "")
        parent, child = element.find("parent"), element.find("child")
        if parent is None or child is None or not name:
            raise ConfigError(
                f"the URDF {path.name} has a joint {name!r} without parent or child",
                where="urdf_path",
            )
        origin = element.find("origin")
        xyz = _floats(None if origin is None else origin.get("xyz"), 3, 0.0, f"joint {name} xyz")
        rpy = _floats(None if origin is None else origin.get("rpy"), 3, 0.0, f"joint {name} rpy")
        transform = np.eye(4)
        transform[:3, :3] = _rpy(*rpy)
        transform[:3, 3] = xyz
        axis_element = element.find("axis")
        axis = np.array(
            _floats(
                None if axis_element is None else axis_element.get("xyz"),
                3,
                0.0,
                f"joint {name} axis",
            )
            if axis_element is not None
            else [1.0, 0.0, 0.0]
        )
        if kind in MOVABLE and np.linalg.norm(axis) == 0:
            raise ConfigError(f"joint {name} of {path.name} has a zero axis", where="urdf_path")
        limit = element.find("limit")
        lower = float(limit.get("lower", "-inf")) if limit is not None else -math.inf
        upper = float(limit.get("upper", "inf")) if limit is not None else math.inf
        if kind == "continuous":
            lower, upper = -math.inf, math.inf
        joints.append(
            _Joint(
                name,
                kind,
                parent.get("link", ""),
                child.get("link", ""),
                transform,
                axis / (np.linalg.norm(axis) or 1.0),
                lower,
                upper,
            )
        )
    children = {j.child for j in joints}
    roots = [link for link in links if link not in children]
    if len(roots) != 1:
        raise ConfigError(
            f"the URDF {path.name} has {len(roots)} root links ({', '.join(roots) or 'none'})",
            where="urdf_path",
            hint="a robot's URDF is one tree from its base link",
        )
    return roots[0], joints


class RobotKinematics:
    def __init__(
        self,
        urdf_path: str | Path,
        target_frame_name: str = "gripper_frame_link",
        joint_names: list[str] | None = None,
    ) -> None:
        path = Path(urdf_path).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"no URDF file at {path}",
                where="urdf_path",
                hint="give the path of the robot's .urdf (for the SO-101: "
                "SO101/so101_new_calib.urdf from TheRobotStudio/SO-ARM100)",
            )
        self.root_link, joints = _parse(path)
        by_child = {j.child: j for j in joints}
        by_name = {j.name: j for j in joints}
        frames = [self.root_link, *(j.child for j in joints), *by_name]
        if target_frame_name not in frames:
            raise ConfigError(
                f"the URDF {path.name} has no frame {target_frame_name!r}",
                where="target_frame_name",
                hint=f"one of: {', '.join(frames)}",
            )
        self.target_frame_name = target_frame_name
        known = [j.name for j in joints if j.kind in MOVABLE]
        self.joint_names = known if joint_names is None else list(joint_names)
        unknown = [name for name in self.joint_names if name not in known]
        if unknown:
            raise ConfigError(
                f"the URDF {path.name} has no joint {', '.join(map(repr, unknown))}",
                where="joint_names",
                hint=f"its movable joints: {', '.join(known)}",
            )
        # The chain from the root to the target frame (a joint's frame is its child link's).
        link = (
            by_name[target_frame_name].child if target_frame_name in by_name else target_frame_name
        )
        chain: list[_Joint] = []
        while link != self.root_link:
            joint = by_child[link]
            chain.append(joint)
            link = joint.parent
        self._chain = chain[::-1]
        index = {name: i for i, name in enumerate(self.joint_names)}
        self._columns = [index.get(j.name) for j in self._chain]
        limits = {j.name: (j.lower, j.upper) for j in joints}
        self._lower = np.array([limits[n][0] for n in self.joint_names])
        self._upper = np.array([limits[n][1] for n in self.joint_names])
        self._prismatic = np.array([by_name[n].kind == "prismatic" for n in self.joint_names])

    def _radians(self, joint_pos_deg: np.ndarray, what: str) -> np.ndarray:
        q = np.asarray(joint_pos_deg, dtype=float).reshape(-1)
        n = len(self.joint_names)
        if q.size < n:
            raise InvalidInput(
                f"{what} has {q.size} values for {n} joints",
                where=what,
                hint=f"give one value (degrees) per joint: {', '.join(self.joint_names)}",
            )
        if not np.all(np.isfinite(q[:n])):
            raise InvalidInput(f"{what} is not finite: {q.tolist()}", where=what)
        # Degrees for revolute joints; a prismatic joint's value is taken as metres, as placo's.
        return np.where(self._prismatic, q[:n], np.deg2rad(q[:n]))

    def _frames(
        self, q: np.ndarray
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, bool]]]:
        """The target's pose and, per chain joint, its axis and origin in the world frame."""
        t = np.eye(4)
        axes: list[tuple[np.ndarray, np.ndarray, bool]] = []
        for joint, column in zip(self._chain, self._columns, strict=True):
            t = t @ joint.origin
            if joint.kind in MOVABLE:
                value = 0.0 if column is None else float(q[column])
                axis_world = t[:3, :3] @ joint.axis
                axes.append((axis_world, t[:3, 3].copy(), joint.kind == "prismatic"))
                motion = np.eye(4)
                if joint.kind == "prismatic":
                    motion[:3, 3] = joint.axis * value
                else:
                    motion[:3, :3] = _axis_angle(joint.axis, value)
                t = t @ motion
            else:
                axes.append((np.zeros(3), np.zeros(3), False))
        return t, axes

    def forward_kinematics(self, joint_pos_deg: np.ndarray) -> np.ndarray:
        """The target frame's 4x4 pose in the root link's frame (metres) at these joints."""
        pose, _ = self._frames(self._radians(joint_pos_deg, "joint positions"))
        return pose

    def inverse_kinematics(
        self,
        current_joint_pos: np.ndarray,
        desired_ee_pose: np.ndarray,
        position_weight: float = 1.0,
        orientation_weight: float = 0.01,
        iterations: int = 1,
    ) -> np.ndarray:
        """Joints (degrees) moving the target frame towards `desired_ee_pose`, starting from
        `current_joint_pos`: `iterations` solver steps (LeRobot takes one per control tick)."""
        desired = np.asarray(desired_ee_pose, dtype=float)
        if desired.shape != (4, 4) or not np.all(np.isfinite(desired)):
            raise InvalidInput(
                "the desired end-effector pose must be a finite 4x4 matrix",
                where="desired_ee_pose",
            )
        current = np.asarray(current_joint_pos, dtype=float).reshape(-1)
        q = self._radians(current, "current joint positions")
        n = len(self.joint_names)
        # placo minimises w_p·|e_p|² + w_o·|e_o|²: rows scaled by the square roots.
        weights = np.sqrt(np.array([position_weight] * 3 + [orientation_weight] * 3, dtype=float))
        for _ in range(max(1, iterations)):
            pose, axes = self._frames(q)
            jacobian = np.zeros((6, n))
            for (axis, origin, prismatic), column in zip(axes, self._columns, strict=True):
                if column is None:
                    continue
                if prismatic:
                    jacobian[:3, column] += axis
                else:
                    jacobian[:3, column] += np.cross(axis, pose[:3, 3] - origin)
                    jacobian[3:, column] += axis
            error = np.concatenate(
                [desired[:3, 3] - pose[:3, 3], _log_rotation(desired[:3, :3] @ pose[:3, :3].T)]
            )
            a = weights[:, None] * jacobian
            step = np.linalg.solve(a.T @ a + DAMPING * np.eye(n), a.T @ (weights * error))
            q = np.clip(q + step, self._lower, self._upper)
        solved = np.where(self._prismatic, q, np.rad2deg(q))
        result = current.astype(float).copy()
        result[:n] = solved
        return result
