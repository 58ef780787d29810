"""Env configs: a tagged union on `type` whose members own the envs they describe.

`EnvConfig` is LeRobot's env config as frozen attrs: `--env.type=pusht --env.task=PushT-v0
--env.episode_length=300`. A member knows its gym id and kwargs, the features it produces and
the map from raw observation keys to policy keys, and builds its vector envs itself
(`create_envs`), so adding an env is one class here or in a third-party package (entry-point
group `rlctl.envs`, see `registry`) and never an edit to a factory.

Importing this module is cheap: gymnasium and the simulators are imported when envs are built.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from rlctl.application.ports.simulation import SimTask, SimulationError
from rlctl.domain.config import Register, tagged_union
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec, typed_feature, typed_features

if TYPE_CHECKING:
    import gymnasium as gym

    from rlctl.adapters.sim.vector import EnvShape, LazyVectorEnv

FeatureType = Literal["STATE", "VISUAL", "ENV", "ACTION"]
ACTION = "action"
# Field metadata of settings LeRobot's env configs do not have (left out of its config files).
RLCTL_ONLY = "rlctl_only"


def lerobot_fields(config: EnvConfig) -> set[str]:
    """The fields of an env config that LeRobot's own config of that type also has."""
    return {f.name for f in attrs.fields(type(config)) if not f.metadata.get(RLCTL_ONLY)}


def env_feature(type: FeatureType, shape: tuple[int, ...]) -> FeatureSpec:
    """A feature an env produces, as LeRobot's env configs declare it: `("VISUAL", (96, 96, 3))`.

    Visual shapes are channel-last (height, width, channels), as the simulator renders them.
    """
    return typed_feature(type, shape, channels_last=True)


def _env_features(value: Mapping[str, Any]) -> dict[str, FeatureSpec]:
    return typed_features(value, channels_last=True)


def _at_least_one(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ConfigError(
            f"{attribute.name} must be at least 1, got {value}", where=f"env.{attribute.name}"
        )


@tagged_union
@attrs.frozen(kw_only=True)
class EnvConfig:
    """What every env type has. Subclasses set defaults and override the hooks below."""

    task: str | None = None
    fps: int = 30
    # None keeps the env's registered step limit.
    episode_length: int | None = None
    # Declared on top of (and winning over) the features the type derives from its settings.
    features: dict[str, FeatureSpec] = attrs.field(factory=dict, converter=_env_features)
    features_map: dict[str, str] = attrs.field(factory=dict)
    # Tasks of a suite run at once (at most the cores), each with its own policy and a share
    # of the cores for its env workers; the next task's envs start while they run.
    max_parallel_tasks: int = attrs.field(default=1, validator=_at_least_one)
    disable_env_checker: bool = True

    type_name: ClassVar[str]
    register: ClassVar[Register]
    # The optional dependency group that installs the simulator (`pip install 'rlctl[pusht]'`).
    extra: ClassVar[str | None] = None

    # --- what the type says about itself ---------------------------------------------------

    @property
    def type(self) -> str:
        return getattr(type(self), "type_name", type(self).__name__)

    @property
    def package_name(self) -> str:
        """The module that registers the gym ids of this type."""
        return f"gym_{self.type}"

    @property
    def gym_id(self) -> str:
        return f"{self.package_name}/{self.task}"

    def gym_kwargs(self) -> dict[str, Any]:
        return {}

    def entry_point(self) -> str | None:
        """A drop-in `module:Class` built instead of the gym id's registered one (None: as is)."""
        return None

    def install_hint(self) -> str:
        """What to run when the simulator package is missing."""
        extra = type(self).extra or self.type
        return f"install it with: pip install 'rlctl[{extra}]' (or: uv sync --extra {extra})"

    def default_features(self) -> dict[str, FeatureSpec]:
        """Features derived from the type's settings (obs_type, image sizes …)."""
        return {}

    def env_features(self) -> dict[str, FeatureSpec]:
        """Every feature the env produces, keyed by its raw observation key (and "action")."""
        return _env_features({**self.default_features(), **self.features})

    def renders_on_gpu(self) -> bool:
        """Whether its envs render through a GL context on a GPU, each live env holding one.

        Then the evaluation does not start the next task's envs ahead by default
        (`--eval.prefetch_next_task=auto`). By default: `MUJOCO_GL=egl` set with an NVIDIA
        device present. MuJoCo env types also count a headless machine, where they choose EGL
        themselves; an env that never renders with GL says False.
        """
        from rlctl.adapters.sim.mujoco_gl import egl_on_gpu

        return egl_on_gpu(headless_default=False)

    def worker_preload(self) -> tuple[str, ...]:
        """Modules the forkserver may import once for all workers (see `vector`).

        Only packages that create no thread, GL context or CUDA state at import time.
        """
        return ()

    def tasks(self) -> list[SimTask]:
        """`(suite, task_id, name)` of every task; one task in the type's own suite by default."""
        return [SimTask(self.type, 0, self.task or "")]

    def env_processors(self) -> tuple[Any, Any]:
        """(pre, post) pipelines between the feature map and the policy; identity by default."""
        from rlctl.domain.processors import ProcessorPipeline

        return ProcessorPipeline(name="env_preprocessor"), ProcessorPipeline(
            name="env_postprocessor"
        )

    # --- building envs ---------------------------------------------------------------------

    def env_factories(self, task: SimTask, n_envs: int) -> list[Callable[[], gym.Env]]:
        """The factories of a task's `n_envs` envs; all alike unless a type numbers them."""
        return [self.env_factory(task)] * n_envs

    def env_factory(self, task: SimTask) -> Callable[[], gym.Env]:
        """A picklable callable that builds one env of `task` (run inside worker processes)."""
        return functools.partial(
            make_gym_env,
            self.gym_id,
            self.package_name,
            self.install_hint(),
            self.disable_env_checker,
            self.episode_length,
            self._gym_kwargs(),
            self.entry_point(),
        )

    def _gym_kwargs(self) -> dict[str, Any]:
        """`gym_kwargs()`, or `gym_kwargs` where a config written for LeRobot made it a property."""
        declared: Any = self.gym_kwargs
        return dict(declared() if callable(declared) else declared)

    def create_envs(
        self,
        n_envs: int,
        use_async: bool = True,
        worker_cores: int | None = None,
        known_shapes: Mapping[str, EnvShape] | None = None,
    ) -> dict[str, dict[int, LazyVectorEnv]]:
        """`{suite: {task_id: vector env}}`; no worker starts before the env is first used.

        `worker_cores` caps each task's worker processes (None: every core); `known_shapes`
        are suites' spaces already read, so that no env is built to read them again.
        """
        from rlctl.adapters.sim.vector import create_task_envs

        if n_envs < 1:
            raise ConfigError(f"n_envs must be at least 1, got {n_envs}", where="eval.batch_size")
        return create_task_envs(
            [(task, self.env_factories(task, n_envs)) for task in self.tasks()],
            use_async,
            preload=self.worker_preload(),
            worker_cores=worker_cores,
            known_shapes=known_shapes,
        )


def ensure_importable(package: str, install_hint: str) -> None:
    """Fail with what to install when `package` is missing, without importing it."""
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise SimulationError(
            f"the simulator package {package!r} is not installed", hint=install_hint
        )


def ensure_gym_id(gym_id: str, package: str, install_hint: str) -> None:
    """Import `package` when `gym_id` is not registered yet; say what to install when missing."""
    from gymnasium.envs.registration import registry

    if gym_id in registry:
        return
    ensure_importable(package, install_hint)
    importlib.import_module(package)
    if gym_id not in registry:
        known = sorted(k for k in registry if k.startswith(f"{package}/"))
        raise ConfigError(
            f"{package} does not register the env {gym_id!r}",
            where="env.task",
            hint=f"known ids: {', '.join(known) or '(none under this package)'}",
        )


def make_gym_env(
    gym_id: str,
    package: str,
    install_hint: str,
    disable_env_checker: bool,
    max_episode_steps: int | None,
    kwargs: Mapping[str, Any],
    entry_point: str | None = None,
) -> gym.Env:
    import dataclasses

    import gymnasium as gym

    ensure_gym_id(gym_id, package, install_hint)
    options: dict[str, Any] = dict(kwargs)
    if max_episode_steps is not None:
        options["max_episode_steps"] = max_episode_steps
    spec: Any = gym_id
    if entry_point is not None:
        # The registered spec (step limit, kwargs, wrappers) with another class behind it.
        spec = dataclasses.replace(gym.spec(gym_id), entry_point=entry_point)
    return gym.make(spec, disable_env_checker=disable_env_checker, **options)


def timed_build(factory: Callable[[], gym.Env]) -> tuple[gym.Env, float]:
    t0 = time.perf_counter()
    env = factory()
    return env, time.perf_counter() - t0
