"""`Simulation` on gymnasium: an env config's envs, seen through the port.

Gymnasium's errors become `SimulationError`s here (see `guarded`). A worker that raised reports
its own exception; a worker that died (segfault, OOM kill) shows as a broken pipe, reported with
its exit code. After any failure the simulator's workers are terminated, not politely closed.

An env config that builds its envs itself (a `create_envs` override, LeRobot's way, returning
plain gymnasium vector envs) is served by `own_envs.OwnEnvs`: its spaces and step time are read
from the envs it returns, not from an env rlctl builds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.sim.config import EnvConfig, timed_build
from rlctl.adapters.sim.guarded import PLAIN_OBSERVATION_KEY as PLAIN_OBSERVATION_KEY
from rlctl.adapters.sim.guarded import GuardedSimulator, as_observation
from rlctl.adapters.sim.mujoco_gl import is_rendering_error, rendering_hint
from rlctl.adapters.sim.own_envs import OwnEnvs, overrides_create_envs
from rlctl.adapters.sim.vector import (
    NEW_EPISODE_OPTION,
    TASK_TEXT_ATTR,
    EnvShape,
    LazyVectorEnv,
    stack_frames,
)
from rlctl.application.ports.simulation import (
    Observation,
    SimProbe,
    SimSpec,
    SimStep,
    SimTask,
    SimulationError,
    VectorSimulator,
)
from rlctl.domain.errors import ConfigError, RlctlError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig

PROBE_STEPS = 5
log = structlog.get_logger(__name__)


class GymVectorSimulator(GuardedSimulator):
    """`VectorSimulator` over a `LazyVectorEnv`."""

    def __init__(
        self,
        env: LazyVectorEnv,
        task: SimTask,
        on_missing_text: Callable[[], None] | None = None,
    ) -> None:
        self._env = env
        self._task = task
        self._on_missing_text = on_missing_text
        self._failed = False
        self._action_dtype = getattr(env.single_action_space, "dtype", None) or np.float32

    @property
    def num_envs(self) -> int:
        return self._env.num_envs

    @property
    def max_episode_steps(self) -> int:
        return self._env.max_episode_steps

    @property
    def vector_env(self) -> LazyVectorEnv:
        return self._env

    @property
    def single_action_space(self) -> Any:
        return self._env.single_action_space

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._env.metadata)

    def start(self) -> None:
        self._env.start()

    def reset(self, seeds: Sequence[int] | None = None) -> Observation:
        seed = [int(s) for s in seeds] if seeds is not None else None
        observation, _ = self._guard(
            "reset", lambda: self._env.reset(seed=seed, options={NEW_EPISODE_OPTION: True})
        )
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
        texts = self._guard("read the task text", lambda: self._env.call(TASK_TEXT_ATTR))
        if any(t is None for t in texts) and self._on_missing_text is not None:
            self._on_missing_text()
        return ["" if t is None else str(t) for t in texts]

    def render(self, n: int) -> np.ndarray | None:
        return stack_frames(self._guard("render", lambda: self._env.render_first(n)))

    def close(self) -> None:
        self._env.close(terminate=self._failed)

    def _worker_processes(self) -> list[Any]:
        return self._env.processes


class GymSimulation:
    """`Simulation` for one `EnvConfig`."""

    def __init__(self, config: EnvConfig) -> None:
        self.config = config
        self._probe_env: Any = None
        self._start_s = 0.0
        self._shape: EnvShape | None = None
        self._warned_no_text = False
        self._warned_no_frames = False
        # The envs of a config that builds them itself (a `create_envs` override).
        self._own = (
            OwnEnvs(config, self._warn_no_text, self._warn_no_frames)
            if overrides_create_envs(config)
            else None
        )

    def tasks(self) -> list[SimTask]:
        if self._own is not None:
            return self._own.tasks()
        return self.config.tasks()

    def processors(self, policy: PolicyConfig | None = None) -> tuple[Any, Any]:
        """The env's processors, or those `policy`'s type brings for this env type."""
        if policy is not None:
            own = policy_env_processors(policy, self.config.type)
            if own is not None:
                return own
        return self.config.env_processors()

    def spec(self) -> SimSpec:
        if self._own is not None:
            return self._own.spec()
        shape = self._shape_of_first_task()
        space = shape.action_space
        action_shape = space.shape or ()
        features: dict[str, FeatureSpec] = dict(self.config.env_features())
        features.setdefault("action", FeatureSpec("action", "float32", tuple(action_shape)))
        limit = self.config.episode_length or shape.max_episode_steps
        return SimSpec(
            features=features,
            feature_map=dict(self.config.features_map),
            fps=int(self.config.fps or shape.metadata.get("render_fps") or 30),
            max_episode_steps=int(min(limit, shape.max_episode_steps)),
            # Non-Box action spaces (Discrete …) have no bounds a random policy could sample.
            action_low=np.asarray(getattr(space, "low", np.zeros(action_shape)), dtype=np.float64),
            action_high=np.asarray(
                getattr(space, "high", np.zeros(action_shape)), dtype=np.float64
            ),
            max_parallel_tasks=self.config.max_parallel_tasks,
            renders_on_gpu=self.config.renders_on_gpu(),
            observation_bounds=bounded_observations(shape.observation_space),
        )

    def probe(self) -> SimProbe:
        if self._own is not None:
            return self._own.probe()
        env = self._ensure_probe_env()
        try:
            t0 = time.perf_counter()
            observation, _ = env.reset(seed=0)
            start_s = self._start_s + time.perf_counter() - t0
            text = env.rlctl_task_text
            if text is None:
                self._warn_no_text()
            t0 = time.perf_counter()
            for _ in range(PROBE_STEPS):
                _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                if terminated or truncated:
                    env.reset()
            step_s = (time.perf_counter() - t0) / PROBE_STEPS
        except RlctlError:
            raise
        except Exception as error:
            raise SimulationError(
                f"the simulator failed while being probed: {type(error).__name__}: {error}",
                where=f"env.type={self.config.type}",
                hint=rendering_hint() if is_rendering_error(error) else None,
            ) from error
        finally:
            self._close_probe_env()
        batched = {k: np.asarray(v)[None] for k, v in as_observation(observation).items()}
        return SimProbe(observation=batched, task=text or "", start_s=start_s, step_s=step_s)

    def create(
        self, n_envs: int, use_async: bool, worker_cores: int | None = None
    ) -> Mapping[str, Mapping[int, VectorSimulator]]:
        if self._own is not None:
            return self._own.create(n_envs, use_async, worker_cores)
        self._close_probe_env()
        tasks = {(t.suite, t.task_id): t for t in self.config.tasks()}
        # The first suite's spaces were read from the probe env: no env is built again for them.
        first = self.config.tasks()[0].suite
        known = {first: self._shape} if self._shape is not None else None
        envs = self.config.create_envs(n_envs, use_async, worker_cores, known)
        return {
            suite: {
                tid: GymVectorSimulator(
                    env, tasks.get((suite, tid), SimTask(suite, tid)), self._warn_no_text
                )
                for tid, env in group.items()
            }
            for suite, group in envs.items()
        }

    def _warn_no_text(self, used: str = "") -> None:
        # Once per run, whichever of the probe and the rollouts notices first.
        if not self._warned_no_text:
            self._warned_no_text = True
            log.warning(
                "the environment has neither task_description nor task; "
                "language-conditioned policies need one",
                env=self.config.type,
                task=self.config.task,
                task_text=used,
            )

    def _warn_no_frames(self) -> None:
        if not self._warned_no_frames:
            self._warned_no_frames = True
            log.warning(
                "the environment gives no frames to film: no videos "
                "(its create_envs may make the envs with render_mode='rgb_array')",
                env=self.config.type,
            )

    def _shape_of_first_task(self) -> EnvShape:
        if self._shape is None:
            self._shape = EnvShape(self._ensure_probe_env())
        return self._shape

    def _ensure_probe_env(self) -> Any:
        if self._probe_env is None:
            from rlctl.adapters.sim.vector import EvalEnvWrapper

            first = self.config.tasks()[0]
            try:
                env, self._start_s = timed_build(self.config.env_factory(first))
            except RlctlError:
                raise
            except Exception as error:
                raise SimulationError(
                    f"could not build the env: {type(error).__name__}: {error}",
                    where=f"env.type={self.config.type}"
                    + (f", task {first.name}" if first.name else ""),
                    hint=rendering_hint()
                    if is_rendering_error(error)
                    else "check the env's settings (task, obs_type, sizes) against what it accepts",
                ) from error
            self._probe_env = EvalEnvWrapper(env)
        return self._probe_env

    def _close_probe_env(self) -> None:
        if self._probe_env is not None:
            env, self._probe_env = self._probe_env, None
            env.close()


def policy_env_processors(policy: PolicyConfig, env_type: str) -> tuple[Any, Any] | None:
    """The env processors `policy`'s type brings for `env_type` (its implementation's
    `env_processors` hook), or None. A type whose implementation is not installed here (a
    policy served by another machine) brings none."""
    from rlctl.adapters.policies.implementations import implementation_of

    try:
        implementation = implementation_of(type(policy))
    except ConfigError:
        return None
    return implementation.env_processors(policy, env_type)


def bounded_observations(space: Any, prefix: str = "") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(low, high) of each float box of an observation space whose bounds are all finite, by
    raw key (a nested dict's keys joined with "/", as `pixels/front`; a lone box is `state`, as
    `as_observation` names it); images (integer boxes) and unbounded boxes are left out."""
    spaces = getattr(space, "spaces", None)
    if isinstance(spaces, Mapping):
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for key, sub in spaces.items():
            out.update(bounded_observations(sub, f"{prefix}{key}/"))
        return out
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    dtype = np.dtype(getattr(space, "dtype", None) or np.float64)
    if low is None or high is None or dtype.kind != "f":
        return {}
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()) or (low > high).any():
        return {}
    return {prefix.removesuffix("/") or PLAIN_OBSERVATION_KEY: (low, high)}
