"""LeRobot 0.6.1's `RobotKinematics` on placo: forward kinematics of a URDF's chain to one frame,
and inverse kinematics as placo's weighted frame task, joints in degrees.

    kin = RobotKinematics("so101.urdf", target_frame_name="gripper_frame_link",
                          joint_names=["shoulder_pan", "shoulder_lift", ...])
    pose = kin.forward_kinematics(q_deg)           # 4x4, metres
    q = kin.inverse_kinematics(q_deg, desired_4x4) # one solver step from q, as LeRobot's

Joint values past `joint_names` (a gripper) are passed through unchanged, as LeRobot does.
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from rlctl.domain.errors import ConfigError, InvalidInput, NotSupported

INSTALL_HINT = (
    "install the kinematics extra: `uv sync --extra kinematics` "
    "(or pip install 'rlctl[kinematics]')"
)


def _placo() -> Any:
    try:
        with warnings.catch_warnings():  # pinocchio's own import of hppfcl, renamed coal
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module("placo")
    except ImportError as error:
        raise NotSupported(
            f"kinematics need placo, which is not installed or fails to import ({error})",
            where="placo",
            hint=INSTALL_HINT,
        ) from error


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
        placo = _placo()
        try:
            self.robot = placo.RobotWrapper(str(path))
        except Exception as error:  # placo raises RuntimeError and others on a bad file
            raise ConfigError(
                f"placo cannot load the URDF {path}: {error}",
                where="urdf_path",
                hint="check that the file is a valid URDF and its meshes (if any) are beside it",
            ) from error
        self.solver = placo.KinematicsSolver(self.robot)
        self.solver.mask_fbase(True)  # a fixed base, as LeRobot's
        frames = [str(name) for name in self.robot.frame_names()]
        if target_frame_name not in frames:
            raise ConfigError(
                f"the URDF {path.name} has no frame {target_frame_name!r}",
                where="target_frame_name",
                hint=f"one of: {', '.join(frames)}",
            )
        self.target_frame_name = target_frame_name
        known = [str(name) for name in self.robot.joint_names()]
        self.joint_names = known if joint_names is None else list(joint_names)
        unknown = [name for name in self.joint_names if name not in known]
        if unknown:
            raise ConfigError(
                f"the URDF {path.name} has no joint {', '.join(map(repr, unknown))}",
                where="joint_names",
                hint=f"its movable joints: {', '.join(known)}",
            )
        self.tip_frame = self.solver.add_frame_task(self.target_frame_name, np.eye(4))

    def _set_joints(self, joint_pos_deg: np.ndarray, what: str) -> None:
        q = np.asarray(joint_pos_deg, dtype=float).reshape(-1)
        if q.size < len(self.joint_names):
            raise InvalidInput(
                f"{what} has {q.size} values for {len(self.joint_names)} joints",
                where=what,
                hint=f"give one value (degrees) per joint: {', '.join(self.joint_names)}",
            )
        if not np.all(np.isfinite(q[: len(self.joint_names)])):
            raise InvalidInput(f"{what} is not finite: {q.tolist()}", where=what)
        for name, value in zip(
            self.joint_names, np.deg2rad(q[: len(self.joint_names)]), strict=True
        ):
            self.robot.set_joint(name, float(value))

    def forward_kinematics(self, joint_pos_deg: np.ndarray) -> np.ndarray:
        """The target frame's 4x4 pose in the base frame (metres) at these joints (degrees)."""
        self._set_joints(joint_pos_deg, "joint positions")
        self.robot.update_kinematics()
        return np.array(self.robot.get_T_world_frame(self.target_frame_name), dtype=float)

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
        self._set_joints(current, "current joint positions")
        self.tip_frame.T_world_frame = desired
        self.tip_frame.configure(
            self.target_frame_name, "soft", position_weight, orientation_weight
        )
        for _ in range(max(1, iterations)):
            self.solver.solve(True)
            self.robot.update_kinematics()
        solved = np.rad2deg([float(self.robot.get_joint(name)) for name in self.joint_names])
        if current.size > len(self.joint_names):
            result = current.copy()
            result[: len(self.joint_names)] = solved
            return result
        return np.asarray(solved, dtype=float)
