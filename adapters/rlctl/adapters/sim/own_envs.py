"""Envs an env config builds itself: a `create_envs` override, as LeRobot's env configs may have.

LeRobot's `EnvConfig.create_envs(n_envs, use_async_envs=False)` returns `{suite: {task_id:
gym.vector.VectorEnv}}`, and an env type may override it to build its envs its own way. rlctl
calls an override with the arguments its signature names (LeRobot's `use_async_envs`, or
rlctl's `use_async`, `worker_cores`, `known_shapes`), takes a bare vector env as
`{type: {0: env}}`, and evaluates whatever vector envs come back: rlctl's own lazy ones as
usual, any other gymnasium `VectorEnv` through `PlainVectorSimulator`.

Such envs exist once `create_envs` returns, so their spaces, step limit and step time are read
from the first one: `OwnEnvs` calls the override once (one env per task, in-process) for the
spec and the probe, hands those very envs to the evaluation when it asks for that batch, and
otherwise calls the override again with the chosen batch size and closes the first ones (an env
the override returns again, one it built once and keeps returning, is kept).
"""

from __future__ import annotations

import inspect
import operator
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlctl.adapters.sim.config import EnvConfig
from rlctl.adapters.sim.mujoco_gl import is_rendering_error, rendering_hint
from rlctl.adapters.sim.plain_vector import PlainVectorSimulator
from rlctl.application.ports.simulation import SimProbe, SimSpec, SimTask, SimulationError
from rlctl.domain.errors import ConfigError, RlctlError
from rlctl.domain.features import FeatureSpec

PROBE_STEPS = 5
SHAPE_HINT = (
    "return {suite: {task_id: vector env}}, e.g. "
    "{'my_suite': {0: gym.vector.SyncVectorEnv([make_env] * n_envs)}}"
)
SINGLE_HINT = "; a single env becomes one with gym.vector.SyncVectorEnv([lambda: env])"
# rlctl's names for what `create_envs` is told, besides n_envs.
RLCTL_ARGUMENTS = ("use_async", "worker_cores", "known_shapes")


def overrides_create_envs(config: EnvConfig) -> bool:
    return type(config).create_envs is not EnvConfig.create_envs


def call_create_envs(
    config: EnvConfig,
    n_envs: int,
    use_async: bool,
    worker_cores: int | None = None,
    known_shapes: Any = None,
) -> Any:
    """`config.create_envs(n_envs, ...)` with the arguments its signature takes."""
    try:
        params = inspect.signature(config.create_envs).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    offered = {
        "use_async": use_async,
        "use_async_envs": use_async,
        "worker_cores": worker_cores,
        "known_shapes": known_shapes,
    }
    kwargs = {name: value for name, value in offered.items() if name in params}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if takes_any and "use_async_envs" not in params:  # `**kwargs` passed on to rlctl's own
        kwargs.update({name: offered[name] for name in RLCTL_ARGUMENTS})
    if n_envs < 1:
        raise ConfigError(f"n_envs must be at least 1, got {n_envs}", where="eval.batch_size")
    try:
        return config.create_envs(n_envs, **kwargs)
    except RlctlError:
        raise
    except Exception as error:
        raise SimulationError(
            f"the env config's create_envs failed: {type(error).__name__}: {error}",
            where=f"env.type={config.type}",
            hint=rendering_hint()
            if is_rendering_error(error)
            else "it is the env type's own code; --debug shows where it raised",
        ) from error


def _is_vector_env(env: Any) -> bool:
    import gymnasium as gym

    from rlctl.adapters.sim.vector import LazyVectorEnv

    return isinstance(env, gym.vector.VectorEnv | LazyVectorEnv)


def normalize_created(result: Any, config: EnvConfig) -> dict[str, dict[int, Any]]:
    """`{suite: {task_id: vector env}}` from what `create_envs` returned, or one clear error
    (after closing whatever vector envs it did return)."""
    where = f"env.type={config.type}"
    if _is_vector_env(result):
        return {config.type: {0: result}}
    import gymnasium as gym

    problem: str | None = None
    single = isinstance(result, gym.Env)
    out: dict[str, dict[int, Any]] = {}
    if not isinstance(result, Mapping) or not result:
        problem = f"returned {_what(result)}"
    else:
        for suite, group in result.items():
            if not isinstance(group, Mapping) or not group:
                problem = f"returned {_what(group)} for suite {suite!r}"
                break
            for task_id, env in group.items():
                try:
                    index = operator.index(task_id)
                except TypeError:
                    problem = f"returned the task id {task_id!r} in suite {suite!r}"
                    break
                if not _is_vector_env(env):
                    problem = f"returned {_what(env)} for task {suite}/{task_id}"
                    single = isinstance(env, gym.Env)
                    break
                out.setdefault(str(suite), {})[index] = env
            if problem:
                break
    if problem is None:
        return out
    _close_found(result)
    raise ConfigError(
        f"{type(config).__name__}.create_envs {problem}; expected a gymnasium vector env per "
        "task, by suite (task ids are whole numbers)",
        where=where,
        hint=SHAPE_HINT
        + (
            "; a single env becomes one with gym.vector.SyncVectorEnv([lambda: env])"
            if single
            else ""
        ),
    )


def _what(value: Any) -> str:
    if isinstance(value, Mapping) and not value:
        return "an empty mapping"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def _close_found(result: Any) -> None:
    from rlctl.adapters.sim.vector import LazyVectorEnv, close_vector_env

    groups = result.values() if isinstance(result, Mapping) else []
    for group in groups:
        for env in group.values() if isinstance(group, Mapping) else [group]:
            if isinstance(env, LazyVectorEnv):
                env.close()
            elif _is_vector_env(env):
                close_vector_env(env, terminate=True)


class OwnEnvs:
    """The `Simulation` side of an env config that builds its envs itself."""

    def __init__(
        self,
        config: EnvConfig,
        on_missing_text: Callable[[str], None],
        on_no_frames: Callable[[], None],
    ) -> None:
        self.config = config
        self._on_missing_text = on_missing_text
        self._on_no_frames = on_no_frames
        self._made: dict[str, dict[int, Any]] | None = None
        self._made_for: tuple[int, bool] | None = None
        self._made_s = 0.0
        self._spec: SimSpec | None = None
        self._tasks: list[SimTask] | None = None

    # --- the simulation's questions --------------------------------------------------------

    def tasks(self) -> list[SimTask]:
        if self._tasks is None:
            made = self._first_made()
            self._tasks = [self._task(suite, tid) for suite, group in made.items() for tid in group]
        return list(self._tasks)

    def spec(self) -> SimSpec:
        if self._spec is None:
            first = self._first()
            space = first.single_action_space
            action_shape = tuple(space.shape or ())
            features: dict[str, FeatureSpec] = dict(self.config.env_features())
            features.setdefault("action", FeatureSpec("action", "float32", action_shape))
            limit = int(first.max_episode_steps)
            if self.config.episode_length:
                limit = min(limit, int(self.config.episode_length))
            self._spec = SimSpec(
                features=features,
                feature_map=dict(self.config.features_map),
                fps=int(self.config.fps or first.metadata.get("render_fps") or 30),
                max_episode_steps=limit,
                action_low=np.asarray(
                    getattr(space, "low", np.zeros(action_shape)), dtype=np.float64
                ),
                action_high=np.asarray(
                    getattr(space, "high", np.zeros(action_shape)), dtype=np.float64
                ),
                max_parallel_tasks=self.config.max_parallel_tasks,
                renders_on_gpu=self.config.renders_on_gpu(),
            )
        return self._spec

    def probe(self) -> SimProbe:
        sim = self._first()
        n = sim.num_envs
        space = sim.single_action_space
        t0 = time.perf_counter()
        observation = sim.reset(list(range(n)))
        reset_s = time.perf_counter() - t0
        texts = sim.task_descriptions()
        t0 = time.perf_counter()
        for _ in range(PROBE_STEPS):
            sim.step(np.stack([np.asarray(space.sample()) for _ in range(n)]))
        elapsed = (time.perf_counter() - t0) / PROBE_STEPS
        # One in-process vector step steps each env in turn; workers step theirs side by side.
        step_s = elapsed if sim._worker_processes() else elapsed / n
        tasks = max(1, sum(len(g) for g in (self._made or {}).values()))
        return SimProbe(
            observation={k: np.asarray(v)[:1] for k, v in observation.items()},
            task=texts[0] if texts else "",
            start_s=self._made_s / tasks + reset_s,
            step_s=step_s,
        )

    def create(
        self, n_envs: int, use_async: bool, worker_cores: int | None = None
    ) -> dict[str, dict[int, Any]]:
        if self._made is not None and self._made_for == (n_envs, use_async):
            made, self._made = self._made, None
            return made
        result = normalize_created(
            call_create_envs(self.config, n_envs, use_async, worker_cores), self.config
        )
        earlier = {
            id(sim.vector_env): sim
            for group in (self._made or {}).values()
            for sim in group.values()
        }
        self._made = None
        out = {
            suite: {
                tid: earlier.pop(id(env), None) or self._wrap(env, self._task(suite, tid))
                for tid, env in group.items()
            }
            for suite, group in result.items()
        }
        for sim in earlier.values():  # the first envs, which the evaluation will not use
            sim.close()
        return out

    # --- making and wrapping ---------------------------------------------------------------

    def _first_made(self) -> dict[str, dict[int, Any]]:
        if self._made is None:
            t0 = time.perf_counter()
            result = normalize_created(call_create_envs(self.config, 1, False), self.config)
            self._made_s = time.perf_counter() - t0
            self._made_for = (1, False)
            self._made = {
                suite: {tid: self._wrap(env, self._task(suite, tid)) for tid, env in group.items()}
                for suite, group in result.items()
            }
        return self._made

    def _first(self) -> Any:
        made = self._first_made()
        return next(iter(next(iter(made.values())).values()))

    def _task(self, suite: str, task_id: int) -> SimTask:
        names = {(t.suite, t.task_id): t.name for t in self.config.tasks()}
        return SimTask(suite, task_id, names.get((suite, task_id), ""))

    def _wrap(self, env: Any, task: SimTask) -> Any:
        from rlctl.adapters.sim.vector import LazyVectorEnv

        if isinstance(env, LazyVectorEnv):
            from rlctl.adapters.sim.simulation import GymVectorSimulator

            return GymVectorSimulator(env, task, lambda: self._on_missing_text(""))
        return PlainVectorSimulator(
            env,
            task,
            episode_length=self.config.episode_length,
            fallback_text=task.name or self.config.task or "",
            on_missing_text=self._on_missing_text,
            on_no_frames=self._on_no_frames,
        )
