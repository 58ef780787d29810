"""The Unitree G1's arm inverse kinematics and gravity torques, as LeRobot 0.6.1's `G1_29_ArmIK`
(`robots/unitree_g1/g1_kinematics.py`) computes them, and the exoskeleton arms' forward
kinematics (`teleoperators/unitree_g1/exo_ik.py`).

The models are the URDFs of the Hub repo `lerobot/unitree-g1-mujoco` (LeRobot's
`snapshot_download`): `assets/g1_body29_hand14.urdf` for the G1, `assets/exo_left.urdf` and
`assets/exo_right.urdf` for the exoskeleton arms. Only the URDFs are fetched (the meshes serve
LeRobot's viewer, not the solver); a local folder with the same layout is used as it is.

The solver is LeRobot's: pinocchio's model of the G1 with every joint but the 14 arm joints
locked at 0; an end-effector frame 5 cm along each wrist-yaw joint (`L_ee`, `R_ee`); and a
casadi/ipopt problem over the 14 joints within their limits, minimising
`50 |p - p*|^2 + |log3(R R*^T)|^2 + 0.02 |q|^2 + 0.1 |q - q_prev|^2` for both hands (ipopt: 50
iterations, tol 1e-6), started from the previous solution, whose result passes LeRobot's
weighted moving filter (weights 0.4, 0.3, 0.2, 0.1 over the last four solutions, the oldest
weighing most, as LeRobot's filter applies them). A solve that does not converge keeps the
previous joints, as LeRobot's does.

The symbolic forward kinematics are rlctl's: PyPI's pinocchio wheels have no casadi bindings
(LeRobot takes them from conda), so the chain is rebuilt in casadi from pinocchio's reduced
model (each joint's placement and axis), and checked against pinocchio's own forward
kinematics in the tests. `|log3|^2` is the rotation angle squared, taken as
`atan2(|vee(R - R^T)|/2, (tr R - 1)/2)^2`, smooth at the target.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from rlctl.domain.errors import ConfigError, NotSupported

log = structlog.get_logger(__name__)

ASSETS_REPO = "lerobot/unitree-g1-mujoco"
G1_URDF = "assets/g1_body29_hand14.urdf"
EXO_URDFS = {"left": "assets/exo_left.urdf", "right": "assets/exo_right.urdf"}
EXTRA_HINT = "pip install 'rlctl[unitree_g1]' (pinocchio and casadi)"

# The 14 arm joints in the G1's motor order (LeRobot's `G1_29_JointArmIndex`): LeRobot's name
# (the action's `<name>.q`) and the URDF's joint.
ARM_JOINTS: tuple[tuple[str, str], ...] = (
    ("kLeftShoulderPitch", "left_shoulder_pitch_joint"),
    ("kLeftShoulderRoll", "left_shoulder_roll_joint"),
    ("kLeftShoulderYaw", "left_shoulder_yaw_joint"),
    ("kLeftElbow", "left_elbow_joint"),
    ("kLeftWristRoll", "left_wrist_roll_joint"),
    ("kLeftWristPitch", "left_wrist_pitch_joint"),
    ("kLeftWristYaw", "left_wrist_yaw_joint"),
    ("kRightShoulderPitch", "right_shoulder_pitch_joint"),
    ("kRightShoulderRoll", "right_shoulder_roll_joint"),
    ("kRightShoulderYaw", "right_shoulder_yaw_joint"),
    ("kRightElbow", "right_elbow_joint"),
    ("kRightWristRoll", "right_wrist_roll_joint"),
    ("kRightWristPitch", "right_wrist_pitch_joint"),
    ("kRightWristYaw", "right_wrist_yaw_joint"),
)
ARM_URDF_JOINTS = tuple(urdf for _, urdf in ARM_JOINTS)
EE_OFFSET = np.array([0.05, 0.0, 0.0])  # the hands' frames along the wrist-yaw joints
# Where LeRobot places each exoskeleton's end effector in the G1's frame.
EXO_OFFSETS = {"left": np.array([0.6, 0.3, 0.0]), "right": np.array([0.6, -0.3, 0.0])}
FILTER_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
# LeRobot's settings; "sb" only keeps ipopt's banner off the terminal.
IPOPT = {"print_level": 0, "max_iter": 50, "tol": 1e-6, "sb": "yes"}
_ANGLE_EPS = 1e-18  # keeps the rotation angle's derivative finite at the target


def pinocchio() -> Any:
    try:
        import pinocchio as pin
    except ImportError as error:
        raise NotSupported(
            "pinocchio is not installed: the G1's arm kinematics need it",
            where="unitree_g1",
            hint=EXTRA_HINT,
        ) from error
    return pin


def casadi() -> Any:
    try:
        import casadi as ca
    except ImportError as error:
        raise NotSupported(
            "casadi is not installed: the G1's arm inverse kinematics need it",
            where="unitree_g1",
            hint=EXTRA_HINT,
        ) from error
    return ca


def assets_folder(source: str) -> Path:
    """The folder holding `assets/*.urdf`: `source` itself when it is a local folder, else the
    Hub repo `source` (downloaded once into the Hugging Face cache, as LeRobot does)."""
    local = Path(source).expanduser()
    if local.is_dir():
        return local
    from rlctl.adapters.hub.huggingface import HuggingFaceHub
    from rlctl.application.ports.hub import RepoRef

    snapshot = HuggingFaceHub().download(RepoRef(source, kind="model"), allow=["assets/*.urdf"])
    return snapshot.root


def _urdf(folder: Path, relative: str, source: str) -> Path:
    path = folder / relative
    if not path.is_file():
        raise ConfigError(
            f"{relative} is missing from {source}",
            where=str(folder),
            hint=f"point --teleop.assets at a copy of the Hub repo {ASSETS_REPO} "
            "(or leave it at its default to download it)",
        )
    return path


def _build_model(pin: Any, path: Path) -> Any:
    try:
        return pin.buildModelFromUrdf(str(path))
    except (RuntimeError, ValueError) as error:
        raise ConfigError(
            f"pinocchio cannot read the URDF: {str(error).strip().splitlines()[0]}",
            where=str(path),
            hint=f"use the URDFs of the Hub repo {ASSETS_REPO}",
        ) from error


# --- the G1's arms ---------------------------------------------------------------------------


class WeightedMovingFilter:
    """LeRobot's filter of the solutions: a repeated solution is skipped; until the window is
    full the newest is returned as it is."""

    def __init__(self, weights: Sequence[float], size: int) -> None:
        self._weights = np.asarray(weights, dtype=float)
        self._queue: deque[np.ndarray] = deque(maxlen=len(weights))
        self.filtered = np.zeros(size)

    def add(self, value: np.ndarray) -> np.ndarray:
        if self._queue and np.array_equal(value, self._queue[-1]):
            return self.filtered
        self._queue.append(np.array(value, dtype=float))
        if len(self._queue) < self._queue.maxlen:  # type: ignore[operator]
            self.filtered = self._queue[-1]
        else:
            self.filtered = np.asarray(self._queue).T @ self._weights
        return self.filtered


class G1ArmIK:
    """LeRobot's `G1_29_ArmIK` on the G1's URDF at `urdf`. Joint vectors are in the G1's motor
    order (`ARM_JOINTS`). casadi is needed from the first solve on (gravity torques need only
    pinocchio)."""

    def __init__(self, urdf: Path) -> None:
        pin = pinocchio()
        full = _build_model(pin, urdf)
        names = list(full.names)
        missing = [j for j in ARM_URDF_JOINTS if j not in names]
        if missing:
            raise ConfigError(
                f"the G1's URDF has no joint {', '.join(missing)}",
                where=str(urdf),
                hint=f"use {G1_URDF} of the Hub repo {ASSETS_REPO}",
            )
        # LeRobot locks the legs, the waist and the hands at 0: everything but the arms.
        locked = [full.getJointId(n) for n in names[1:] if n not in ARM_URDF_JOINTS]
        self._pin = pin
        self.model = pin.buildReducedModel(full, locked, np.zeros(full.nq))
        self.data = self.model.createData()
        if self.model.nq != len(ARM_JOINTS):
            raise ConfigError(
                f"the G1's arm joints take {self.model.nq} coordinates, not {len(ARM_JOINTS)} "
                "(a joint that is not a plain revolute one)",
                where=str(urdf),
            )
        self.urdf = urdf
        model = self.model
        # Pinocchio orders q by its tree; LeRobot's order is the motors'.
        self._q_index = [model.idx_qs[model.getJointId(j)] for j in ARM_URDF_JOINTS]
        self.lower = np.asarray(model.lowerPositionLimit)[self._q_index]
        self.upper = np.asarray(model.upperPositionLimit)[self._q_index]
        self._ee_parent = {
            "left": model.getJointId("left_wrist_yaw_joint"),
            "right": model.getJointId("right_wrist_yaw_joint"),
        }
        self._opti: Any = None  # the casadi problem, built on the first solve
        self.q = np.zeros(len(ARM_JOINTS))  # LeRobot's `init_data`: the last solution
        self._filter = WeightedMovingFilter(FILTER_WEIGHTS, len(ARM_JOINTS))

    # orders

    def to_pin(self, q_motor: np.ndarray) -> np.ndarray:
        q = np.zeros(self.model.nq)
        q[self._q_index] = q_motor
        return q

    def to_motor(self, q_pin: np.ndarray) -> np.ndarray:
        return np.asarray(q_pin, dtype=float)[self._q_index]

    # numeric kinematics (pinocchio's own)

    def hand_poses(self, q_motor: np.ndarray) -> dict[str, np.ndarray]:
        """Both hands' frames (4x4, in the G1's frame) at the joints `q_motor`."""
        pin = self._pin
        pin.forwardKinematics(self.model, self.data, self.to_pin(q_motor))
        out = {}
        for side, joint in self._ee_parent.items():
            ee = self.data.oMi[joint] * pin.SE3(np.eye(3), EE_OFFSET)
            out[side] = np.asarray(ee.homogeneous)
        return out

    def gravity_torques(self, q_motor: np.ndarray) -> np.ndarray:
        """The torques that hold the arms still at `q_motor` (RNEA with no velocity nor
        acceleration; LeRobot's `solve_tau`), in the motors' order."""
        pin = self._pin
        nv = self.model.nv
        tau = pin.rnea(self.model, self.data, self.to_pin(q_motor), np.zeros(nv), np.zeros(nv))
        return self.to_motor(tau)

    # the solver

    def _build_problem(self) -> None:
        ca = casadi()
        nq = self.model.nq
        q = ca.SX.sym("q", nq, 1)
        tf_l = ca.SX.sym("tf_l", 4, 4)
        tf_r = ca.SX.sym("tf_r", 4, 4)
        hands = symbolic_hands(ca, self.model, q, self._ee_parent)
        translation = ca.vertcat(
            hands["left"][:3, 3] - tf_l[:3, 3], hands["right"][:3, 3] - tf_r[:3, 3]
        )
        rotation = rotation_angle_sq(ca, hands["left"][:3, :3] @ tf_l[:3, :3].T)
        rotation += rotation_angle_sq(ca, hands["right"][:3, :3] @ tf_r[:3, :3].T)
        self._hands_fn = ca.Function("hands", [q], [hands["left"], hands["right"]])
        costs = ca.Function("costs", [q, tf_l, tf_r], [ca.sumsqr(translation), rotation])
        opti = ca.Opti()
        var_q = opti.variable(nq)
        q_last = opti.parameter(nq)
        p_l = opti.parameter(4, 4)
        p_r = opti.parameter(4, 4)
        translational_cost, rotation_cost = costs(var_q, p_l, p_r)
        opti.subject_to(
            opti.bounded(self.model.lowerPositionLimit, var_q, self.model.upperPositionLimit)
        )
        opti.minimize(
            50 * translational_cost
            + rotation_cost
            + 0.02 * ca.sumsqr(var_q)
            + 0.1 * ca.sumsqr(var_q - q_last)
        )
        opti.solver("ipopt", {"ipopt": IPOPT, "print_time": False, "calc_lam_p": False})
        self._opti, self._var_q, self._q_last = opti, var_q, q_last
        self._p_l, self._p_r = p_l, p_r

    def symbolic_hand_poses(self, q_motor: np.ndarray) -> dict[str, np.ndarray]:
        """The hands' frames from the casadi chain the solver uses (checked against
        `hand_poses`)."""
        if self._opti is None:
            self._build_problem()
        left, right = self._hands_fn(self.to_pin(q_motor))
        return {"left": np.asarray(left), "right": np.asarray(right)}

    def solve(
        self, left: np.ndarray, right: np.ndarray, current: np.ndarray | None = None
    ) -> tuple[np.ndarray, bool]:
        """Joints (motor order) putting the hands at the 4x4 poses `left` and `right`, from
        `current` (else the last solution); and whether ipopt converged. As LeRobot's
        `solve_ik`: a failed solve returns `current` and still feeds the filter."""
        if self._opti is None:
            self._build_problem()
        if current is not None:
            self.q = np.asarray(current, dtype=float)
        start = self.to_pin(self.q)
        opti = self._opti
        opti.set_initial(self._var_q, start)
        opti.set_value(self._p_l, left)
        opti.set_value(self._p_r, right)
        opti.set_value(self._q_last, start)
        converged = True
        try:
            solution = opti.solve()
            q_pin = np.asarray(solution.value(self._var_q), dtype=float).reshape(-1)
        except RuntimeError as error:
            converged = False
            log.warning("G1 arm IK did not converge", cause=str(error).splitlines()[-1])
            q_pin = np.asarray(opti.debug.value(self._var_q), dtype=float).reshape(-1)
        filtered = self._filter.add(self.to_motor(q_pin))
        previous = self.q
        self.q = np.array(filtered)
        if not converged:
            return previous, False
        return np.array(filtered), True


def symbolic_hands(ca: Any, model: Any, q: Any, parents: Mapping[str, int]) -> dict[str, Any]:
    """The hands' 4x4 frames as casadi expressions of `q`, walking pinocchio's reduced model:
    each joint's frame is its parent's, then its placement, then its rotation by q."""
    frames: list[Any] = [ca.SX.eye(4)]
    for i in range(1, model.njoints):
        joint = model.joints[i]
        axis = _revolute_axis(joint)
        if axis is None:
            raise ConfigError(
                f"the G1's arm joint {model.names[i]} is a {joint.shortname()}, not a revolute "
                "joint",
                where="unitree_g1 URDF",
            )
        placement = model.jointPlacements[i]
        motion = ca.SX.eye(4)
        motion[:3, :3] = _rodrigues(ca, axis, q[joint.idx_q])
        fixed = ca.SX(np.asarray(placement.homogeneous))
        frames.append(frames[model.parents[i]] @ fixed @ motion)
    tip = np.eye(4)
    tip[:3, 3] = EE_OFFSET
    return {side: frames[j] @ ca.SX(tip) for side, j in parents.items()}


def _revolute_axis(joint: Any) -> np.ndarray | None:
    kind = joint.shortname()
    fixed_axes = {"JointModelRX": (1, 0, 0), "JointModelRY": (0, 1, 0), "JointModelRZ": (0, 0, 1)}
    if kind in fixed_axes:
        return np.asarray(fixed_axes[kind], dtype=float)
    if kind == "JointModelRevoluteUnaligned":
        axis = np.asarray(joint.extract().axis, dtype=float)
        return axis / np.linalg.norm(axis)
    return None


def _rodrigues(ca: Any, axis: np.ndarray, angle: Any) -> Any:
    x, y, z = (float(v) for v in axis)
    k = ca.SX(np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]]))
    return ca.SX.eye(3) + ca.sin(angle) * k + (1 - ca.cos(angle)) * (k @ k)


def rotation_angle_sq(ca: Any, r: Any) -> Any:
    """|log3(r)|^2: the angle of the rotation `r`, squared."""
    vee = ca.vertcat(r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]) / 2
    cosine = (r[0, 0] + r[1, 1] + r[2, 2] - 1) / 2
    return ca.atan2(ca.sqrt(ca.sumsqr(vee) + _ANGLE_EPS), cosine) ** 2


# --- the exoskeleton's arms -----------------------------------------------------------------


class ExoArmKinematics:
    """One exoskeleton arm's URDF (LeRobot's `exo_left.urdf` / `exo_right.urdf`): its joints are
    the exoskeleton's (`shoulder_pitch` ... `wrist_roll`), its end effector the frame `ee` (else
    its last body, as LeRobot picks it)."""

    def __init__(self, urdf: Path, side: str, joints: Sequence[str]) -> None:
        pin = pinocchio()
        self._pin = pin
        self.side = side
        self.model = _build_model(pin, urdf)
        self.data = self.model.createData()
        names = list(self.model.names)
        self.q_index = {
            name: self.model.idx_qs[self.model.getJointId(name)] for name in joints if name in names
        }
        if not self.q_index:
            raise ConfigError(
                f"the {side} exoskeleton's URDF has none of the joints {', '.join(joints)}",
                where=str(urdf),
                hint=f"use {EXO_URDFS[side]} of the Hub repo {ASSETS_REPO}",
            )
        self.ee = self._end_effector()
        self.q = np.asarray(pin.neutral(self.model), dtype=float)

    def _end_effector(self) -> int:
        model = self.model
        if model.existFrame("ee"):
            return int(model.getFrameId("ee"))
        for fid in reversed(range(model.nframes)):
            if model.frames[fid].type == self._pin.FrameType.BODY:
                return fid
        return 0

    def target(self, angles: Mapping[str, float]) -> np.ndarray:
        """The G1 hand's target (4x4): the exoskeleton's end effector at `angles`, shifted by
        LeRobot's offset for this side (the joints not given keep their last angle)."""
        pin = self._pin
        for name, angle in angles.items():
            index = self.q_index.get(name)
            if index is not None:
                self.q[index] = float(angle)
        pin.forwardKinematics(self.model, self.data, self.q)
        pin.updateFramePlacements(self.model, self.data)
        ee = self.data.oMf[self.ee]
        target = np.eye(4)
        target[:3, :3] = ee.rotation
        target[:3, 3] = EXO_OFFSETS[self.side] + ee.translation
        return target


class ExoToG1Arms:
    """LeRobot's `ExoskeletonIKHelper.compute_g1_joints_from_exo`: both exoskeletons' end
    effectors become the G1's hands' targets, solved for the 14 arm joints; the `frozen` joints
    (URDF names) keep their values."""

    def __init__(
        self, ik: G1ArmIK, exo: Mapping[str, ExoArmKinematics], frozen: Sequence[str] = ()
    ) -> None:
        unknown = [name for name in frozen if name not in ARM_URDF_JOINTS]
        if unknown:
            raise ConfigError(
                f"frozen_joints names {', '.join(unknown)}, which are not G1 arm joints",
                where="teleop.frozen_joints",
                hint=f"comma-separated URDF names among: {', '.join(ARM_URDF_JOINTS)}",
            )
        self.ik = ik
        self.exo = dict(exo)
        self._frozen = [ARM_URDF_JOINTS.index(name) for name in frozen]
        self.q = np.zeros(len(ARM_JOINTS))

    def __call__(
        self, left: Mapping[str, float], right: Mapping[str, float]
    ) -> tuple[np.ndarray, bool]:
        targets = {"left": self.exo["left"].target(left), "right": self.exo["right"].target(right)}
        held = self.q[self._frozen].copy()
        q, converged = self.ik.solve(targets["left"], targets["right"], current=self.q)
        q = np.array(q, dtype=float)
        q[self._frozen] = held
        self.q = q
        return q, converged


def load_exo_to_g1(source: str, joints: Sequence[str], frozen: Sequence[str] = ()) -> ExoToG1Arms:
    """The solver on the URDFs of `source` (a Hub repo id or a local copy of one)."""
    casadi()  # said now, not at the first action
    folder = assets_folder(source)
    ik = G1ArmIK(_urdf(folder, G1_URDF, source))
    exo = {
        side: ExoArmKinematics(_urdf(folder, relative, source), side, joints)
        for side, relative in EXO_URDFS.items()
    }
    return ExoToG1Arms(ik, exo, frozen)


def load_g1_arm_ik(source: str) -> G1ArmIK:
    return G1ArmIK(_urdf(assets_folder(source), G1_URDF, source))
