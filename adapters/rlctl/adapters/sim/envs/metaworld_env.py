"""One Meta-World (v3) task as a gymnasium env with LeRobot's observation layout.

Observations: `pixels` (the `corner2` camera, flipped upright), `agent_pos` (hand xyz and
gripper: the first four state values), and with `obs_type="state"` rlctl's render-free mode
`agent_pos` plus `environment_state` (Meta-World's full 39-value state, what its scripted
experts read). An episode ends on success or after 500 steps.

`environment_state` is in every observation, whatever the obs_type, so that the scripted expert
can act (as a teleoperator recording pixel demonstrations, say); only with `obs_type="state"`
is it a declared feature (see `envs.metaworld`), so elsewhere it is never recorded into a
dataset nor read by a trained policy.

The MuJoCo model and its renderer are built on the first reset, inside the worker process that
steps the env: building them in the parent and forking breaks offscreen GL contexts.
Seeding: `reset(seed=s)` re-seeds Meta-World's own generator, so seed s always places the
objects in the same spots (LeRobot seeds the same way).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlctl.adapters.sim.mujoco_gl import use_offscreen_gl_when_headless

TASKS_FILE = Path(__file__).with_name("metaworld_tasks.json")
MAX_EPISODE_STEPS = 500  # Meta-World's max_path_length for every v3 task
ACTION_DIM = 4
AGENT_POS_DIM = 4
STATE_DIM = 39
DEFAULT_CAMERA = "corner2"
OBS_TYPES = ("pixels", "pixels_agent_pos", "state")


@cache
def task_table() -> dict[str, Any]:
    """`{"suites": {difficulty: [task, ...]}, "tasks": {task: {description, expert}}}`."""
    return json.loads(TASKS_FILE.read_text(encoding="utf-8"))


def task_name(task: str) -> str:
    return task.removeprefix("metaworld-")


@cache
def _benchmark(task: str) -> Any:
    # Building MT1 samples fifty task variants (about a second); envs of one task in one
    # process share it.
    import metaworld

    return metaworld.MT1(task, seed=42)


class MetaWorldEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 80}

    def __init__(
        self,
        task: str,
        obs_type: str = "pixels_agent_pos",
        camera_name: str = DEFAULT_CAMERA,
        render_mode: str = "rgb_array",
        observation_width: int = 480,
        observation_height: int = 480,
    ) -> None:
        super().__init__()
        if obs_type not in OBS_TYPES:
            raise ValueError(f"obs_type must be one of {OBS_TYPES}, got {obs_type!r}")
        self.task = task_name(task)
        entry = task_table()["tasks"].get(self.task, {})
        self.task_description = entry.get("description", self.task)
        self.obs_type = obs_type
        self.camera_name = camera_name
        self.render_mode = render_mode
        self.observation_width = observation_width
        self.observation_height = observation_height
        self._max_episode_steps = MAX_EPISODE_STEPS
        self._env: Any = None
        self.observation_space = spaces.Dict(self._observation_spaces())
        self.action_space = spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32)

    def _observation_spaces(self) -> dict[str, spaces.Space]:
        out: dict[str, spaces.Space] = {}
        if self.obs_type != "state":
            shape = (self.observation_height, self.observation_width, 3)
            out["pixels"] = spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        if self.obs_type in ("pixels_agent_pos", "state"):
            out["agent_pos"] = spaces.Box(-1000.0, 1000.0, (AGENT_POS_DIM,), dtype=np.float64)
        out["environment_state"] = spaces.Box(-np.inf, np.inf, (STATE_DIM,), dtype=np.float64)
        return out

    def _ensure_env(self) -> Any:
        if self._env is not None:
            return self._env
        # Headless (servers, CI, workers): render offscreen through EGL, not a GLFW window.
        use_offscreen_gl_when_headless()
        benchmark = _benchmark(self.task)
        env = benchmark.train_classes[self.task](
            render_mode=self.render_mode,
            camera_name=self.camera_name,
            width=self.observation_width,
            height=self.observation_height,
        )
        env.set_task(benchmark.train_tasks[0])
        if self.camera_name == DEFAULT_CAMERA:
            env.model.cam_pos[2] = [0.75, 0.075, 0.7]  # LeRobot's framing of the corner camera
        env.reset()
        # Let reset(seed) move the objects (MT1 freezes them at the task's sampled positions).
        env._freeze_rand_vec = False
        env.seeded_rand_vec = True
        self._env = env
        return env

    def render(self) -> np.ndarray:
        image = self._ensure_env().render()
        if self.camera_name == DEFAULT_CAMERA:
            image = np.flip(image, (0, 1))  # this camera renders upside down
        return np.ascontiguousarray(image)

    def _observation(self, state: np.ndarray) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if self.obs_type != "state":
            out["pixels"] = self.render()
        if self.obs_type in ("pixels_agent_pos", "state"):
            out["agent_pos"] = np.asarray(state[:AGENT_POS_DIM], dtype=np.float64)
        out["environment_state"] = np.asarray(state, dtype=np.float64)
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        env = self._ensure_env()
        super().reset(seed=seed)
        if seed is not None:
            env.seed(seed)
        state, _ = env.reset()
        return self._observation(state), {"is_success": False}

    def step(self, action: np.ndarray):
        env = self._ensure_env()
        action = np.asarray(action, dtype=np.float32)
        if action.ndim != 1:
            raise ValueError(f"expected one action of shape ({ACTION_DIM},), got {action.shape}")
        state, reward, done, truncated, info = env.step(action)
        is_success = bool(info.get("success", 0))
        info = {**info, "task": self.task, "is_success": is_success}
        return (
            self._observation(state),
            float(reward),
            bool(done or is_success),
            bool(truncated),
            info,
        )

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
