"""Vector envs for evaluation: created lazily, started in the background, frozen once done.

- `LazyVectorEnv` holds the env factories of one task and builds the gymnasium vector env on
  first use, or in a background thread after `start()`. A suite of many tasks therefore has at
  most two tasks' workers alive: the running task's, and the next task's, started in the
  background while the running one steps (the evaluation closes each task's when it is done);
  with N tasks running at once, N + 1. With `--eval.prefetch_next_task` off (the default where
  envs render on a GPU) nothing is started ahead: one task's (N). `start`, `ensure` and
  `close` may be called from different threads (a running task prefetches the task another
  thread will run).
- Worker processes (`ShardedVectorEnv`: no more than the cores, each holding a shard of the
  envs) come from a forkserver: they do not inherit the main process's torch, CUDA or renderer
  state, and each simulator creates its renderer on the first reset inside its worker. The
  forkserver imports gymnasium and the simulator's package once (`preload`), so each worker
  is forked with them already imported instead of importing them itself: on two cores that
  turns seconds of start-up per worker into milliseconds.
- `EvalEnvWrapper` wraps every sub-env: once its episode has ended it replays the terminal step
  instead of simulating (a finished env costs nothing while the batch's slowest env runs on),
  and it answers `rlctl_task_text` (`task_description`, else `task`, else None), so asking for
  task text never reaches a sub-env that has no such attribute (in a worker that would raise and
  kill the worker).
- Per-task envs: `create_task_envs` takes each task's factories, one per env of the batch (an env
  such as LIBERO gives each its own initial-state index).
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.forkserver
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import structlog

from rlctl.adapters.sim.sharded import ShardedVectorEnv
from rlctl.application.ports.simulation import SimTask
from rlctl.domain.rollout_plan import worker_count

NEW_EPISODE_OPTION = "rlctl_new_episode"
TASK_TEXT_ATTR = "rlctl_task_text"
_TASK_TEXT_SOURCES = ("task_description", "task")

log = structlog.get_logger(__name__)

# Always worth importing once in the forkserver: what every worker needs before its env.
BASE_PRELOAD = ("__main__", "numpy", "gymnasium", "rlctl.adapters.sim.vector")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def preload_in_forkserver(modules: Sequence[str]) -> None:
    """Ask the forkserver to import `modules` before forking workers.

    Only modules that do not start threads, GL contexts or CUDA at import time belong here.
    The list applies when the forkserver starts; once it runs, later calls change nothing
    (multiprocessing keeps one forkserver per process), which is harmless.
    """
    server = multiprocessing.forkserver._forkserver
    wanted = list(dict.fromkeys([*BASE_PRELOAD, *modules]))
    if getattr(server, "_forkserver_pid", None) is None:
        server.set_forkserver_preload(wanted)


class EvalEnvWrapper(gym.Wrapper):
    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._frozen: tuple[Any, ...] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = dict(options or {})
        new_episode = options.pop(NEW_EPISODE_OPTION, False)
        if self._frozen is not None and not new_episode:
            # Gymnasium's autoreset of an env whose episode the rollout has finished with.
            observation, _, _, _, info = self._frozen
            return observation, info
        self._frozen = None
        return self.env.reset(seed=seed, options=options or None)

    def step(self, action: Any):
        if self._frozen is not None:
            return self._frozen
        observation, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self._frozen = (observation, 0.0, terminated, truncated, info)
        return observation, reward, terminated, truncated, info

    @property
    def rlctl_task_text(self) -> str | None:
        """`task_description`, then `task`; "" when one is there but empty, None when neither is."""
        found = False
        for name in _TASK_TEXT_SOURCES:
            try:
                value = self.env.get_wrapper_attr(name)
            except AttributeError:
                continue
            found = True
            if isinstance(value, str) and value:
                return value
        return "" if found else None


def _build_wrapped(factory: Callable[[], gym.Env]) -> gym.Env:
    return EvalEnvWrapper(factory())


def max_episode_steps_of(env: gym.Env, default: int = 1000) -> int:
    spec = getattr(env, "spec", None)
    if spec is not None and spec.max_episode_steps:
        return int(spec.max_episode_steps)
    try:
        return int(env.get_wrapper_attr("_max_episode_steps"))
    except (AttributeError, TypeError, ValueError):
        return default


class EnvShape:
    """The spaces and limits of a task's env, read once per suite from one in-process env."""

    def __init__(self, env: gym.Env) -> None:
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.metadata = dict(getattr(env, "metadata", {}) or {})
        self.max_episode_steps = max_episode_steps_of(env)

    @classmethod
    def probe(cls, factory: Callable[[], gym.Env]) -> EnvShape:
        env = factory()
        try:
            return cls(env)
        finally:
            env.close()


class LazyVectorEnv:
    """A gymnasium vector env built on first use (or in the background after `start()`)."""

    def __init__(
        self,
        factories: Sequence[Callable[[], gym.Env]],
        use_async: bool,
        shape: EnvShape | None = None,
        preload: Sequence[str] = (),
        worker_cores: int | None = None,
    ) -> None:
        self.env_fns = [functools.partial(_build_wrapped, f) for f in factories]
        self.preload = tuple(preload)
        self.num_envs = len(self.env_fns)
        # The plan asks for workers for one env only when tasks run side by side.
        self.use_async = use_async
        # The cores this task's workers may use: all of them unless tasks run side by side.
        self.worker_cores = worker_cores
        self.shape = shape or EnvShape.probe(factories[0])
        self.single_observation_space = self.shape.observation_space
        self.single_action_space = self.shape.action_space
        self.metadata = self.shape.metadata
        self.max_episode_steps = self.shape.max_episode_steps
        self._env: gym.vector.SyncVectorEnv | ShardedVectorEnv | None = None
        self._starter: threading.Thread | None = None
        self._start_error: BaseException | None = None
        self._lock = threading.Lock()
        self.closed = False

    @property
    def n_workers(self) -> int:
        """Worker processes the env runs in; 0 in-process."""
        if not self.use_async:
            return 0
        cores = available_cores()
        return worker_count(self.num_envs, min(cores, self.worker_cores or cores))

    @property
    def env(self) -> gym.vector.VectorEnv | None:
        """The underlying vector env, None until started."""
        return self._env

    @property
    def processes(self) -> list[Any]:
        return list(getattr(self._env, "processes", []) or [])

    def start(self) -> None:
        with self._lock:
            if self.closed or self._env is not None or self._starter is not None:
                return
            if not self.use_async:
                return  # in-process envs are cheap to build when first used
            self._starter = threading.Thread(target=self._start_in_background, daemon=True)
            self._starter.start()

    def ensure(self) -> gym.vector.SyncVectorEnv | ShardedVectorEnv:
        env = self._env
        if env is not None and self._starter is None and not self.closed:
            return env  # every step after the first: no lock taken
        with self._lock:
            if self.closed:
                raise gym.error.ClosedEnvironmentError("the vector env is closed")
            if self._starter is not None:
                self._starter.join()
                self._starter = None
            if self._start_error is not None:
                error, self._start_error = self._start_error, None
                raise error
            if self._env is None:
                self._env = self._build()
            return self._env

    def _start_in_background(self) -> None:
        try:
            self._env = self._build()
        except BaseException as error:
            self._start_error = error

    def _build(self) -> gym.vector.SyncVectorEnv | ShardedVectorEnv:
        # Same-step autoreset would reset a finished env inside the step and hide its terminal
        # info under `final_info`; next-step autoreset plus the freezing wrapper keeps it simple.
        mode = gym.vector.AutoresetMode.NEXT_STEP
        if self.use_async:
            preload_in_forkserver(self.preload)
            return ShardedVectorEnv(
                self.env_fns,
                self.n_workers,
                observation_space=self.single_observation_space,
                action_space=self.single_action_space,
                metadata=self.metadata,
            )
        return gym.vector.SyncVectorEnv(self.env_fns, autoreset_mode=mode)

    def reset(self, **kwargs: Any):
        return self.ensure().reset(**kwargs)

    def step(self, actions: Any):
        return self.ensure().step(actions)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return self.ensure().call(name, *args, **kwargs)

    def render_first(self, n: int) -> list[Any]:
        env = self.ensure()
        if isinstance(env, ShardedVectorEnv):
            return env.render_first(n)
        return [env.envs[i].render() for i in range(n)]

    def close(self, terminate: bool = False) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._starter is not None:
                self._starter.join()
                self._starter = None
            env, self._env = self._env, None
        if env is not None:
            close_vector_env(env, terminate=terminate)


def close_vector_env(env: gym.vector.VectorEnv, terminate: bool = False) -> None:
    """Close, and make sure no worker process outlives it, even after a crash."""
    processes = list(getattr(env, "processes", []) or [])
    try:
        if processes:
            env.close(terminate=terminate)
        else:
            env.close()
    except Exception as error:
        # A dead worker breaks the polite close; the processes are reaped below either way.
        log.warning("closing a vector env failed", error=f"{type(error).__name__}: {error}")
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)


def create_task_envs(
    tasks: Sequence[tuple[SimTask, Sequence[Callable[[], gym.Env]]]],
    use_async: bool,
    preload: Sequence[str] = (),
    worker_cores: int | None = None,
    known_shapes: Mapping[str, EnvShape] | None = None,
) -> dict[str, dict[int, LazyVectorEnv]]:
    """One lazy vector env per task, over that task's factories (one per env); spaces are
    probed once per suite, unless `known_shapes` has the suite's already (an env such as LIBERO
    takes seconds to build). `worker_cores` caps each task's worker processes."""
    out: dict[str, dict[int, LazyVectorEnv]] = {}
    shapes: dict[str, EnvShape] = dict(known_shapes or {})
    for task, factories in tasks:
        shape = shapes.get(task.suite)
        lazy = LazyVectorEnv(factories, use_async, shape, preload, worker_cores)
        shapes.setdefault(task.suite, lazy.shape)
        out.setdefault(task.suite, {})[task.task_id] = lazy
    return out


def stack_frames(frames: Sequence[Any]) -> np.ndarray | None:
    if not frames or any(f is None for f in frames):
        return None
    return np.stack([np.asarray(f) for f in frames])
