"""`VectorSimulator` over any gymnasium `VectorEnv`: what an env config's own `create_envs`
returns, as in LeRobot (a `SyncVectorEnv` or `AsyncVectorEnv` of plain gym envs).

rlctl's own vector envs wrap each sub-env (`vector.EvalEnvWrapper`) so that they answer the task
text, render the first few envs and know their step limit. A plain vector env has none of that,
so this adapter derives each from what gymnasium offers every env, and never asks a sub-env for
an attribute it lacks (in an `AsyncVectorEnv` worker that raises, and the worker dies):

- task text: `env.call("task_description")`, else `task`, checked first with
  `has_wrapper_attr`; an env with neither gets the task's name (the config's task), else "";
- frames: each sub-env's `render()` (in-process), or `env.call("render")` (workers); envs
  made without a render mode (`render_mode="rgb_array"`), or that give no frame, are not
  filmed, which is said once;
- the step limit: the env config's `episode_length`, else the vector env's spec, else the
  sub-envs' specs or `_max_episode_steps`; an env with none is refused with what to set;
- start: nothing (the envs are built already); close: as rlctl's, workers reaped whatever
  happened.

Finished sub-envs keep being stepped (gymnasium resets them); the rollout ignores what they say.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlctl.adapters.sim.guarded import GuardedSimulator, as_observation, task_place
from rlctl.adapters.sim.vector import close_vector_env, stack_frames
from rlctl.application.ports.simulation import Observation, SimStep, SimTask
from rlctl.domain.errors import ConfigError

TASK_TEXT_SOURCES = ("task_description", "task")
LIMIT_ATTR = "_max_episode_steps"


class PlainVectorSimulator(GuardedSimulator):
    def __init__(
        self,
        env: gym.vector.VectorEnv,
        task: SimTask,
        *,
        episode_length: int | None = None,
        fallback_text: str = "",
        on_missing_text: Callable[[str], None] | None = None,
        on_no_frames: Callable[[], None] | None = None,
    ) -> None:
        # Typed loosely: `call` and `get_attr` are on every gymnasium vector env, not its base.
        self._env: Any = env
        self._task = task
        self._failed = False
        self._closed = False
        self._episode_length = episode_length
        self._fallback_text = fallback_text
        self._on_missing_text = on_missing_text
        self._on_no_frames = on_no_frames
        self._limit: int | None = None
        self._text_sources: list[str] | None = None
        self._renders = True
        self.single_action_space = env.single_action_space
        self.single_observation_space = env.single_observation_space
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self._action_dtype = getattr(env.single_action_space, "dtype", None) or np.float32

    @property
    def vector_env(self) -> gym.vector.VectorEnv:
        return self._env

    @property
    def num_envs(self) -> int:
        return int(self._env.num_envs)

    @property
    def max_episode_steps(self) -> int:
        if self._limit is None:
            self._limit = self._guard("read the step limit", self._find_limit)
        return self._limit

    def start(self) -> None:
        """Nothing to start: `create_envs` built the envs (an AsyncVectorEnv's workers run)."""

    def reset(self, seeds: Sequence[int] | None = None) -> Observation:
        seed = [int(s) for s in seeds] if seeds is not None else None
        observation, _ = self._guard("reset", lambda: self._env.reset(seed=seed))
        return as_observation(observation)

    def step(self, actions: np.ndarray) -> SimStep:
        actions = np.asarray(actions, dtype=self._action_dtype)
        observation, reward, terminated, truncated, info = self._guard(
            "step", lambda: self._env.step(actions)
        )
        return SimStep(
            observation=as_observation(observation),
            reward=np.asarray(reward, dtype=np.float64),
            terminated=np.asarray(terminated, dtype=bool),
            truncated=np.asarray(truncated, dtype=bool),
            info=info,
        )

    def task_descriptions(self) -> list[str]:
        return self._guard("read the task text", self._read_texts)

    def render(self, n: int) -> np.ndarray | None:
        if not self._renders or n < 1:
            return None
        frames = stack_frames(self._guard("render", lambda: self._frames(n)))
        if frames is None:
            self._renders = False
            if self._on_no_frames is not None:
                self._on_no_frames()
        return frames

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close_vector_env(self._env, terminate=self._failed)

    # --- what a plain vector env is asked, and how ---------------------------------------

    def _worker_processes(self) -> list[Any]:
        return list(getattr(self._base(), "processes", None) or [])

    def _base(self) -> Any:
        """The vector env under any vector wrappers."""
        return getattr(self._env, "unwrapped", self._env)

    def _has(self, name: str) -> list[bool]:
        # Every gymnasium env answers this without raising, in-process or in a worker.
        return [bool(v) for v in self._env.call("has_wrapper_attr", name)]

    def _read_texts(self) -> list[str]:
        if self._text_sources is None:
            # A source only some sub-envs have is not asked: the others' workers would die.
            self._text_sources = [n for n in TASK_TEXT_SOURCES if all(self._has(n))]
            if not self._text_sources and self._on_missing_text is not None:
                self._on_missing_text(self._fallback_text)
        if not self._text_sources:
            return [self._fallback_text] * self.num_envs
        texts = [""] * self.num_envs
        for name in self._text_sources:
            if all(texts):
                break
            for i, value in enumerate(self._env.call(name)):
                if not texts[i] and isinstance(value, str):
                    texts[i] = value
        return texts

    def _frames(self, n: int) -> list[Any]:
        if getattr(self._env, "render_mode", None) is None:
            # Made without a render mode, an env gives no frame (or raises, which would kill
            # a worker): not asked.
            return [None]
        base = self._base()
        if isinstance(base, gym.vector.SyncVectorEnv):
            return [base.envs[i].render() for i in range(n)]
        return list(self._env.call("render"))[:n]

    def _find_limit(self) -> int:
        if self._episode_length:
            return int(self._episode_length)
        spec = getattr(self._env, "spec", None)
        if spec is not None and spec.max_episode_steps:
            return int(spec.max_episode_steps)
        base = self._base()
        if isinstance(base, gym.vector.SyncVectorEnv):
            specs = [getattr(env, "spec", None) for env in base.envs]
            limits = [int(s.max_episode_steps) for s in specs if s and s.max_episode_steps]
            if len(limits) == self.num_envs:
                return min(limits)
        # A TimeLimit wrapper's (or an env's own) limit: a number, cheap to ask a worker for.
        if all(self._has(LIMIT_ATTR)):
            values = [v for v in self._env.get_attr(LIMIT_ATTR) if _positive_int(v)]
            if len(values) == self.num_envs:
                return min(int(v) for v in values)
        if not isinstance(base, gym.vector.SyncVectorEnv):
            specs = self._env.get_attr("spec")
            limits = [int(s.max_episode_steps) for s in specs if s and s.max_episode_steps]
            if len(limits) == self.num_envs:
                return min(limits)
        raise ConfigError(
            "the env's create_envs returned vector envs with no step limit",
            where=task_place(self._task),
            hint="set --env.episode_length=N, or give the envs one "
            "(gym.make(id, max_episode_steps=N), or an id registered with max_episode_steps)",
        )


def _positive_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and bool(value > 0)
