"""A tiny third-party env package, installed into a temporary directory for the sim tests.

`rlctl_toy_env` is what an outside package would ship: a gym env, an `EnvConfig` subclass, and
an entry point in the group `rlctl.envs` (a `*.dist-info` folder on `sys.path` is all
importlib.metadata needs). Its env can be told to raise, or to kill its process, at a step,
to test how worker crashes surface.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

TOY_MODULE = """
from __future__ import annotations

import functools
import os

import attrs
import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import register, registry

from rlctl.adapters.sim.config import EnvConfig, make_gym_env
from rlctl.application.ports.simulation import SimTask

GYM_ID = "rlctl_toy/Toy-v0"


class ToyEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, name="a", length=4, crash="", crash_step=3, render_mode="rgb_array"):
        self.name, self.length, self.crash, self.crash_step = name, length, crash, crash_step
        self.render_mode = render_mode
        self.task_description = f"toy task {name}"
        self.observation_space = spaces.Dict({"agent_pos": spaces.Box(-1e6, 1e6, (2,), np.float64)})
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.t = 0

    def _obs(self):
        return {"agent_pos": np.array([self.t, self.np_random.uniform()], dtype=np.float64)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {"is_success": False}

    def step(self, action):
        self.t += 1
        if self.crash and self.t >= self.crash_step:
            if self.crash == "exit":
                os._exit(3)
            raise RuntimeError(f"toy env {self.name} exploded at step {self.t}")
        done = self.t >= self.length
        return self._obs(), float(self.t), done, False, {"is_success": done}

    def render(self):
        return np.full((8, 8, 3), self.t, dtype=np.uint8)


if GYM_ID not in registry:
    register(id=GYM_ID, entry_point=ToyEnv, max_episode_steps=20)


@attrs.frozen(kw_only=True)
class ToyEnvConfig(EnvConfig):
    task: str | None = "a,b,c"
    fps: int = 10
    length: int = 4
    crash: str = ""
    crash_step: int = 3

    @property
    def package_name(self):
        return "rlctl_toy_env"

    @property
    def gym_id(self):
        return GYM_ID

    def tasks(self):
        return [SimTask("toy", i, n) for i, n in enumerate(self.task.split(","))]

    def env_factory(self, task):
        kwargs = {"name": task.name, "length": self.length, "crash": self.crash,
                  "crash_step": self.crash_step}
        return functools.partial(make_gym_env, GYM_ID, "rlctl_toy_env", "pip install toy", True,
                                 None, kwargs)


class BrokenEnvConfig(EnvConfig):
    pass
"""

ENTRY_POINTS = """\
[rlctl.envs]
toy = rlctl_toy_env:ToyEnvConfig
broken = rlctl_toy_missing_module:Nothing
"""


@pytest.fixture(scope="session")
def toy_package(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    (root / "rlctl_toy_env.py").write_text(textwrap.dedent(TOY_MODULE), encoding="utf-8")
    dist = root / "rlctl_toy_env-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rlctl-toy-env\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    # Worker processes get the parent's sys.path, so they import the toy env too.
    sys.path.insert(0, str(root))
    from rlctl.adapters.sim.registry import load_env_plugins

    load_env_plugins(reload=True)
    yield root
    sys.path.remove(str(root))


def worker_processes() -> list[psutil.Process]:
    """Live env workers: grandchildren of this process (forked by the forkserver child)."""
    me = os.getpid()
    out = []
    for proc in psutil.Process(me).children(recursive=True):
        try:
            if proc.ppid() != me and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            continue
    return out


def wait_for_no_workers(timeout_s: float = 10.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while (left := worker_processes()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
