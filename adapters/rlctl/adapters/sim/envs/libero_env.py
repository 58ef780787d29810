"""One LIBERO task as a gymnasium env, with LeRobot 0.6.1's observation layout.

Observation (`obs_type="pixels_agent_pos"`): `pixels/<name>` for each camera (agent view and
wrist by default, named `image` and `image2` through `camera_name_mapping`), and the
`robot_state` dict: `eef/{pos, quat, mat}`, `gripper/{qpos, qvel}`, `joints/{pos, vel}`.
The images come as robosuite renders them (upside down); the env's processor step
(`libero_processor`) turns them and assembles the 8-value state, as LeRobot's does.

Nothing of robosuite or LIBERO is imported or built in the constructor: the simulator, with its
offscreen GL context, is created on the first reset, inside the process that steps it (a worker,
or the evaluating process in-process). `task_description` is the task's instruction and
`is_success` in `info` is LIBERO's own success check; an episode terminates on success.
"""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlctl.adapters.sim.envs.libero_setup import import_libero_envs, require_libero

ACTION_DIM = 7
# Steps of the no-op action after a reset, so that objects dropped into the scene settle.
SETTLE_STEPS = 10
NOOP_ACTION = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)
DEFAULT_CAMERAS = ("agentview_image", "robot0_eye_in_hand_image")
DEFAULT_CAMERA_NAMES = {"agentview_image": "image", "robot0_eye_in_hand_image": "image2"}
_STATE_SHAPES: dict[str, dict[str, tuple[int, ...]]] = {
    "eef": {"pos": (3,), "quat": (4,), "mat": (3, 3)},
    "gripper": {"qpos": (2,), "qvel": (2,)},
    "joints": {"pos": (7,), "vel": (7,)},
}


def load_init_states(path: Path) -> np.ndarray:
    """A task's initial simulator states (`.pruned_init`): a numpy array saved with torch.save.

    The file is a zip holding one pickle of a plain numpy array, which the standard unpickler
    reads without torch (importing torch would cost every worker seconds).
    """
    try:
        with zipfile.ZipFile(path) as archive:
            name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
            with archive.open(name) as handle:
                value = pickle.load(handle)  # LIBERO's own package files
        return np.asarray(value)
    except (zipfile.BadZipFile, StopIteration, pickle.UnpicklingError, AttributeError):
        import torch  # an older torch.save format

        return np.asarray(torch.load(path, weights_only=False))


class LiberoGymEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        suite: str,
        task_id: int,
        task_name: str,
        language: str,
        *,
        max_episode_steps: int,
        cameras: Sequence[str] = DEFAULT_CAMERAS,
        camera_name_mapping: Mapping[str, str] | None = None,
        obs_type: str = "pixels_agent_pos",
        render_mode: str = "rgb_array",
        observation_height: int = 360,
        observation_width: int = 360,
        init_states: bool = True,
        episode_index: int = 0,
        n_envs: int = 1,
        control_freq: int = 20,
        control_mode: str = "relative",
        hard_reset: bool = True,
    ) -> None:
        super().__init__()
        self.suite = suite
        self.task_id = task_id
        self.task = task_name
        self.task_description = language
        self.cameras = tuple(cameras)
        mapping = {**DEFAULT_CAMERA_NAMES, **dict(camera_name_mapping or {})}
        self.camera_names = {camera: mapping.get(camera, camera) for camera in self.cameras}
        self.obs_type = obs_type
        self.render_mode = render_mode
        self.observation_height = observation_height
        self.observation_width = observation_width
        self.use_init_states = init_states
        # Env i of a batch of n starts from initial states i, i + n, i + 2n … (LeRobot's order).
        self._init_state_id = episode_index
        self._init_stride = max(1, n_envs)
        self.control_freq = control_freq
        self.control_mode = control_mode
        self.hard_reset = hard_reset
        self._max_episode_steps = max_episode_steps
        self._sim: Any = None
        # True between building the simulator and its first reset.
        self._fresh = False
        self._last_frame: np.ndarray | None = None
        self._init_states: np.ndarray | None = None
        self.observation_space = spaces.Dict(self._spaces())
        self.action_space = spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32)

    # --- spaces and observations ------------------------------------------------------------

    def _spaces(self) -> dict[str, spaces.Space]:
        image = spaces.Box(
            0, 255, (self.observation_height, self.observation_width, 3), dtype=np.uint8
        )
        out: dict[str, spaces.Space] = {
            "pixels": spaces.Dict({name: image for name in self.camera_names.values()})
        }
        if self.obs_type == "pixels_agent_pos":
            out["robot_state"] = spaces.Dict(
                {
                    group: spaces.Dict(
                        {
                            key: spaces.Box(-np.inf, np.inf, shape, dtype=np.float64)
                            for key, shape in fields.items()
                        }
                    )
                    for group, fields in _STATE_SHAPES.items()
                }
            )
        return out

    def _observation(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        pixels = {self.camera_names[c]: np.asarray(raw[c]) for c in self.cameras}
        # What `render` shows: the first camera as this observation rendered it.
        self._last_frame = pixels[self.camera_names[self.cameras[0]]]
        if self.obs_type != "pixels_agent_pos":
            return {"pixels": pixels}
        robot = self._sim.robots[0]
        return {
            "pixels": pixels,
            "robot_state": {
                "eef": {
                    "pos": np.asarray(raw["robot0_eef_pos"], dtype=np.float64),
                    "quat": np.asarray(raw["robot0_eef_quat"], dtype=np.float64),
                    "mat": np.asarray(robot.controller.ee_ori_mat, dtype=np.float64),
                },
                "gripper": {
                    "qpos": np.asarray(raw["robot0_gripper_qpos"], dtype=np.float64),
                    "qvel": np.asarray(raw["robot0_gripper_qvel"], dtype=np.float64),
                },
                "joints": {
                    "pos": np.asarray(raw["robot0_joint_pos"], dtype=np.float64),
                    "vel": np.asarray(raw["robot0_joint_vel"], dtype=np.float64),
                },
            },
        }

    # --- the simulator, built on first use --------------------------------------------------

    def _paths(self) -> tuple[Path, Path]:
        root = require_libero()
        name = f"{self.task}"
        return (
            root / "bddl_files" / self.suite / f"{name}.bddl",
            root / "init_files" / self.suite / f"{name}.pruned_init",
        )

    def _ensure_sim(self) -> Any:
        if self._sim is not None:
            return self._sim
        envs = import_libero_envs()
        bddl, init_file = self._paths()
        if self.use_init_states and self._init_states is None:
            self._init_states = load_init_states(init_file)
        self._sim = envs.OffScreenRenderEnv(
            bddl_file_name=str(bddl),
            camera_heights=self.observation_height,
            camera_widths=self.observation_width,
            control_freq=self.control_freq,
            hard_reset=self.hard_reset,
        )
        # No reset here: `reset` resets it at once (LeRobot resets twice; with hard resets each
        # rebuilds the MuJoCo model and its GL context, seconds apiece on a CPU).
        self._fresh = True
        return self._sim

    def _reset_sim(self, sim: Any) -> Any:
        if not (self._fresh and self.hard_reset):
            return sim.reset()
        # Just built: a hard reset would compile the same model and make a new GL context again
        # for nothing (the recorded initial state, or the placement sampler, then sets the scene
        # either way). Later resets are hard, as LIBERO's.
        self._fresh = False
        sim.env.hard_reset = False
        try:
            return sim.reset()
        finally:
            sim.env.hard_reset = True

    # --- gymnasium API ----------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        sim = self._ensure_sim()
        super().reset(seed=seed)
        sim.seed(seed)
        raw = self._reset_sim(sim)
        if self._init_states is not None and len(self._init_states):
            raw = sim.set_init_state(
                self._init_states[self._init_state_id % len(self._init_states)]
            )
            self._init_state_id += self._init_stride
        for _ in range(SETTLE_STEPS):
            raw, _, _, _ = sim.step(list(NOOP_ACTION))
        if self.control_mode not in ("relative", "absolute"):
            raise ValueError(
                f"control_mode must be relative or absolute, not {self.control_mode!r}"
            )
        for robot in sim.robots:
            robot.controller.use_delta = self.control_mode == "relative"
        return self._observation(raw), {"is_success": False}

    def step(self, action: np.ndarray):
        sim = self._ensure_sim()
        action = np.asarray(action)
        if action.ndim != 1:
            raise ValueError(f"a LIBERO action is one vector of {ACTION_DIM}, got {action.shape}")
        raw, reward, done, info = sim.step(action)
        success = bool(sim.check_success())
        info = dict(info or {})
        info.update(task=self.task, task_id=self.task_id, done=bool(done), is_success=success)
        return self._observation(raw), float(reward), bool(done or success), False, info

    def render(self) -> np.ndarray:
        """The first camera, right way up. The frame the last observation rendered is reused
        (the scene has not moved since); rendering it again, as LeRobot does, would double the
        rendering cost of every filmed step."""
        if self._last_frame is not None:
            return np.ascontiguousarray(self._last_frame[::-1, ::-1])
        sim = self._ensure_sim()
        raw = sim.env._get_observations()
        # The first camera, turned the right way up (robosuite renders it upside down).
        image = np.asarray(raw[self.cameras[0]])
        return np.ascontiguousarray(image[::-1, ::-1])

    def close(self) -> None:
        if self._sim is not None:
            sim, self._sim = self._sim, None
            self._fresh = False
            self._last_frame = None
            sim.close()
