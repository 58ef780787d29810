"""LeRobot 0.6.1's lower-body locomotion controllers for the Unitree G1 (`--robot.controller`):
ONNX policies run through onnxruntime beside the robot, each step turning the remote's axes and
the robot's state (joints, their velocities, the IMU) into goals for the 15 leg and waist joints.

- `GrootLocomotionController` (`robots/unitree_g1/gr00t_locomotion.py`): NVIDIA's GR00T whole-body
  control, two policies from the Hub repo `nepyope/GR00T-WholeBodyControl_g1` (`...-Balance.onnx`
  when the command is under 0.05, `...-Walk.onnx` otherwise), 50 Hz, six stacked 86-value frames;
  the robot's own gains.
- `HolosomaLocomotionController` (`robots/unitree_g1/holosoma_locomotion.py`): one policy from
  `nepyope/holosoma_locomotion` (`fastsac_g1_29dof.onnx`), 200 Hz, a 100-value observation with a
  gait phase; its gains are the `kp` and `kd` in the model's metadata, as LeRobot reads them.

The arithmetic (scales, default angles, observation layout, the command's signs, dead zones and
clips) is LeRobot's, written out; `tests/adapters/robots/test_g1_locomotion.py` checks it
against tiny ONNX models.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import ConfigError, NotSupported

REMOTE_AXES = ("remote.lx", "remote.ly", "remote.rx", "remote.ry")
REMOTE_BUTTONS = tuple(f"remote.button.{i}" for i in range(16))
NUM_JOINTS = 29
LOWER_BODY = 15  # the legs and the waist: what a controller commands
ARM_JOINTS = tuple(range(15, 29))
EXTRA_HINT = "pip install 'rlctl[unitree_g1]' (onnxruntime and onnx)"


@attrs.frozen(eq=False)
class BodyState:
    """What a controller reads of the robot: joints (rad), their velocities (rad/s), the IMU's
    orientation (quaternion w, x, y, z) and angular velocity (rad/s)."""

    q: np.ndarray
    dq: np.ndarray
    quaternion: np.ndarray
    gyroscope: np.ndarray


def gravity_orientation(quaternion: np.ndarray) -> np.ndarray:
    """Gravity in the body's frame, from its orientation (LeRobot's `get_gravity_orientation`)."""
    qw, qx, qy, qz = (float(v) for v in quaternion)
    return np.array(
        [2 * (-qz * qx + qw * qy), -2 * (qz * qy + qw * qx), 1 - 2 * (qw * qw + qz * qz)],
        dtype=np.float32,
    )


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as error:
        raise NotSupported(
            "onnxruntime is not installed: the G1's locomotion controllers need it",
            where="robot.controller",
            hint=EXTRA_HINT,
        ) from error
    return onnxruntime


def model_file(source: str, filename: str) -> Path:
    """`filename` from `source`: a local folder, else the Hub repo (LeRobot's
    `hf_hub_download`, into the Hugging Face cache)."""
    local = Path(source).expanduser()
    if local.is_dir():
        path = local / filename
        if not path.is_file():
            raise ConfigError(
                f"{filename} is missing from {source}",
                where="robot.controller_repo",
                hint="point it at a copy of the controller's Hub repo, or leave it unset",
            )
        return path
    from rlctl.adapters.hub.huggingface import HuggingFaceHub
    from rlctl.application.ports.hub import RepoRef

    snapshot = HuggingFaceHub().download(RepoRef(source, kind="model"), allow=[filename])
    return snapshot.root / filename


def load_session(path: Path) -> Any:
    ort = _onnxruntime()
    try:
        return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own exception types
        raise ConfigError(
            f"onnxruntime cannot load the controller's policy: {str(error).splitlines()[0]}",
            where=str(path),
            hint="use the ONNX files of LeRobot's controller repos",
        ) from error


def _run(session: Any, obs: np.ndarray, size: int, path: str) -> np.ndarray:
    name = session.get_inputs()[0].name
    out = np.asarray(session.run(None, {name: obs.reshape(1, -1).astype(np.float32)})[0])
    out = out.reshape(-1).astype(np.float32)
    if out.size != size:
        raise ConfigError(
            f"the controller's policy gives {out.size} values, LeRobot's gives {size}",
            where=path,
            hint="use the ONNX files of LeRobot's controller repos",
        )
    return out


class GrootLocomotion:
    """LeRobot's `GrootLocomotionController`."""

    name = "GrootLocomotionController"
    repo = "nepyope/GR00T-WholeBodyControl_g1"
    files = ("GR00T-WholeBodyControl-Balance.onnx", "GR00T-WholeBodyControl-Walk.onnx")
    control_dt = 0.02
    kp: np.ndarray | None = None  # the robot's gains
    kd: np.ndarray | None = None

    DEFAULT_ANGLES = np.zeros(NUM_JOINTS, dtype=np.float32)
    DEFAULT_ANGLES[[0, 6]] = -0.1  # hip pitch
    DEFAULT_ANGLES[[3, 9]] = 0.3  # knee
    DEFAULT_ANGLES[[4, 10]] = -0.2  # ankle pitch
    ACTION_SCALE = 0.25
    ANG_VEL_SCALE = 0.25
    DOF_POS_SCALE = 1.0
    DOF_VEL_SCALE = 0.05
    CMD_SCALE = np.array([2.0, 2.0, 0.25], dtype=np.float32)
    FRAME = 86
    FRAMES = 6

    def __init__(self, source: str | None = None) -> None:
        source = source or self.repo
        paths = [model_file(source, f) for f in self.files]
        self._paths = [str(p) for p in paths]
        self.balance, self.walk = (load_session(p) for p in paths)
        self.reset()

    def reset(self) -> None:
        self.cmd = np.zeros(3, dtype=np.float32)
        self.action = np.zeros(LOWER_BODY, dtype=np.float32)
        self.height_cmd = 0.74
        self.orientation_cmd = np.zeros(3, dtype=np.float32)
        self.history: deque[np.ndarray] = deque(
            [np.zeros(self.FRAME, dtype=np.float32) for _ in range(self.FRAMES)],
            maxlen=self.FRAMES,
        )

    def step(self, inputs: Mapping[str, float], state: BodyState) -> np.ndarray:
        """Goals for joints 0..14 (the legs, then the waist)."""
        buttons = [int(inputs.get(k, 0)) for k in REMOTE_BUTTONS]
        if buttons[0]:  # R1: raise the waist
            self.height_cmd = float(np.clip(self.height_cmd + 0.001, 0.50, 1.00))
        if buttons[4]:  # R2: lower it
            self.height_cmd = float(np.clip(self.height_cmd - 0.001, 0.50, 1.00))
        lx, ly, rx, _ry = (float(inputs.get(k, 0.0)) for k in REMOTE_AXES)
        self.cmd[:] = (ly, -lx, -rx)

        q = np.asarray(state.q, dtype=np.float32)
        dq = np.asarray(state.dq, dtype=np.float32)
        frame = np.zeros(self.FRAME, dtype=np.float32)
        frame[:3] = self.cmd * self.CMD_SCALE
        frame[3] = self.height_cmd
        frame[4:7] = self.orientation_cmd
        frame[7:10] = np.asarray(state.gyroscope, dtype=np.float32) * self.ANG_VEL_SCALE
        frame[10:13] = gravity_orientation(state.quaternion)
        frame[13:42] = (q - self.DEFAULT_ANGLES) * self.DOF_POS_SCALE
        frame[42:71] = dq * self.DOF_VEL_SCALE
        frame[71:86] = self.action
        self.history.append(frame)
        stacked = np.concatenate(list(self.history))

        walking = float(np.linalg.norm(self.cmd)) >= 0.05
        session, path = (self.walk, self._paths[1]) if walking else (self.balance, self._paths[0])
        self.action = _run(session, stacked, LOWER_BODY, path)
        return self.DEFAULT_ANGLES[:LOWER_BODY] + self.action * self.ACTION_SCALE


class HolosomaLocomotion:
    """LeRobot's `HolosomaLocomotionController` (its default policy, FastSAC)."""

    name = "HolosomaLocomotionController"
    repo = "nepyope/holosoma_locomotion"
    files = ("fastsac_g1_29dof.onnx",)
    control_dt = 0.005
    GAIT_PERIOD = 0.5

    DEFAULT_ANGLES = np.zeros(NUM_JOINTS, dtype=np.float32)
    DEFAULT_ANGLES[[0, 6]] = -0.312  # hip pitch
    DEFAULT_ANGLES[[3, 9]] = 0.669  # knee
    DEFAULT_ANGLES[[4, 10]] = -0.363  # ankle pitch
    DEFAULT_ANGLES[[15, 22]] = 0.2  # shoulder pitch
    DEFAULT_ANGLES[16] = 0.2  # left shoulder roll
    DEFAULT_ANGLES[23] = -0.2  # right shoulder roll
    DEFAULT_ANGLES[[18, 25]] = 0.6  # elbow
    ACTION_SCALE = 0.25
    ANG_VEL_SCALE = 0.25
    DOF_POS_SCALE = 1.0
    DOF_VEL_SCALE = 0.05

    def __init__(self, source: str | None = None) -> None:
        path = model_file(source or self.repo, self.files[0])
        self._path = str(path)
        self.policy = load_session(path)
        self.kp, self.kd = self._gains(path)
        self.phase_dt = 2 * np.pi / ((1.0 / self.control_dt) * self.GAIT_PERIOD)
        self.reset()

    def _gains(self, path: Path) -> tuple[np.ndarray, np.ndarray]:
        """The `kp` and `kd` in the model's metadata (LeRobot reads them with `onnx`)."""
        try:
            import onnx
        except ImportError as error:
            raise NotSupported(
                "onnx is not installed: it reads the Holosoma policy's gains",
                where="robot.controller",
                hint=EXTRA_HINT,
            ) from error
        model = onnx.load(str(path), load_external_data=False)
        metadata = {prop.key: prop.value for prop in model.metadata_props}
        gains = []
        for key in ("kp", "kd"):
            try:
                values = np.asarray(json.loads(metadata[key]), dtype=np.float32).reshape(-1)
            except (KeyError, ValueError, TypeError) as error:
                raise ConfigError(
                    f"the Holosoma policy has no usable {key!r} in its metadata",
                    where=self._path,
                    hint="LeRobot's policy carries 29 gains each as JSON lists",
                ) from error
            if values.size != NUM_JOINTS or not np.all(np.isfinite(values)) or (values < 0).any():
                raise ConfigError(
                    f"the Holosoma policy's {key!r} is not 29 gains >= 0",
                    where=self._path,
                )
            gains.append(values)
        return gains[0], gains[1]

    def reset(self) -> None:
        self.cmd = np.zeros(3, dtype=np.float32)
        self.last_action = np.zeros(NUM_JOINTS, dtype=np.float32)
        self.phase = np.array([[0.0, np.pi]], dtype=np.float32)
        self.is_standing = True

    def step(self, inputs: Mapping[str, float], state: BodyState) -> np.ndarray:
        lx, ly, rx, _ry = (float(inputs.get(k, 0.0)) for k in REMOTE_AXES)
        ly = ly if abs(ly) > 0.1 else 0.0
        lx = lx if abs(lx) > 0.1 else 0.0
        rx = rx if abs(rx) > 0.1 else 0.0
        self.cmd[:] = (np.clip(ly, -0.3, 0.3), -np.clip(lx, -0.3, 0.3), -rx)

        q = np.asarray(state.q, dtype=np.float32).copy()
        dq = np.asarray(state.dq, dtype=np.float32).copy()
        arms = list(ARM_JOINTS)
        q[arms] = self.DEFAULT_ANGLES[arms]  # the arms are the teleoperator's: seen at rest
        dq[arms] = 0.0

        if np.linalg.norm(self.cmd[:2]) < 0.01 and abs(self.cmd[2]) < 0.01:
            self.phase[0, :] = np.pi
            self.is_standing = True
        elif self.is_standing:
            self.phase = np.array([[0.0, np.pi]], dtype=np.float32)
            self.is_standing = False
        else:
            self.phase = np.fmod(self.phase + self.phase_dt + np.pi, 2 * np.pi) - np.pi

        obs = np.zeros(100, dtype=np.float32)
        obs[0:29] = self.last_action
        obs[29:32] = np.asarray(state.gyroscope, dtype=np.float32) * self.ANG_VEL_SCALE
        obs[32] = self.cmd[2]
        obs[33:35] = self.cmd[:2]
        obs[35:37] = np.cos(self.phase[0])
        obs[37:66] = (q - self.DEFAULT_ANGLES) * self.DOF_POS_SCALE
        obs[66:95] = dq * self.DOF_VEL_SCALE
        obs[95:98] = gravity_orientation(state.quaternion)
        obs[98:100] = np.sin(self.phase[0])

        action = np.clip(_run(self.policy, obs, NUM_JOINTS, self._path), -100.0, 100.0)
        self.last_action = action.copy()
        target = self.DEFAULT_ANGLES + action * self.ACTION_SCALE
        return target[:LOWER_BODY]


CONTROLLERS: dict[str, type[GrootLocomotion] | type[HolosomaLocomotion]] = {
    GrootLocomotion.name: GrootLocomotion,
    HolosomaLocomotion.name: HolosomaLocomotion,
}


def make_controller(name: str, source: str | None = None) -> GrootLocomotion | HolosomaLocomotion:
    return CONTROLLERS[name](source)
