"""What serves each policy type, found through the `rlctl.policy_models` entry points.

A policy type is a config class (pure data, in the domain or a plugin; entry point group
`rlctl.policies`) plus the class that serves it: a torch `PolicyModel`, or a policy that acts
without training (`RandomPolicy`). The config names no implementation: each distribution declares
the classes it provides in the group `rlctl.policy_models`, named after the policy type,

    [project.entry-points."rlctl.policy_models"]
    my_policy = "my_package.model:MyPolicy"

rlctl's own are declared in the adapters' pyproject.toml. `implementation_of(config_class)` loads
the one of a type on first use (so `rlctl --help` imports no model), checks that it is a
`PolicyImplementation` serving that config class, and keeps it.

`PolicyImplementation` is what rlctl calls on such a class without an instance, each with a
default: `for_simulation` (build the policy for an env, for types that need no training),
`preprocessor_steps` (steps added after batching: a tokenizer …), `arrange_processors` (the
step lists reordered, as π0.5 needs) and `env_processors` (the env processors a type brings for
an env type in place of the env's own, as X-VLA does on LIBERO).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, ClassVar

from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import PolicyConfig, known_policy_types
from rlctl.domain.processors import ProcessorPipeline, ProcessorStep

if TYPE_CHECKING:
    from rlctl.application.ports.policy import Policy
    from rlctl.application.ports.simulation import Simulation

ENTRY_POINT_GROUP = "rlctl.policy_models"


class PolicyImplementation[C: PolicyConfig]:
    """The class serving a policy type, and the hooks rlctl calls on it without an instance."""

    # The config type it serves (checked against the entry point that names it).
    config_class: ClassVar[type[PolicyConfig]] = PolicyConfig

    @classmethod
    def for_simulation(
        cls, config: C, simulation: Simulation, *, seed: int | None = None
    ) -> Policy:
        """The policy acting in `simulation`; types that learn from data are never built so."""
        raise ConfigError(
            f"policy type {config.type_name!r} acts only once trained",
            where="policy.type",
            hint="give a checkpoint with --policy.path=DIR (train one with rlctl train), or "
            "choose a policy that needs no training: "
            + ", ".join(n for n, c in known_policy_types().items() if not c.trainable),
        )

    @classmethod
    def preprocessor_steps(cls, config: C) -> list[ProcessorStep]:
        """Steps this policy adds to its pre-processor after batching (a tokenizer …)."""
        return []

    @classmethod
    def arrange_processors(
        cls, config: C, pre: list[ProcessorStep], post: list[ProcessorStep]
    ) -> tuple[list[ProcessorStep], list[ProcessorStep]]:
        """The default pre- and post-processor steps, rearranged as this policy needs them."""
        return pre, post

    @classmethod
    def env_processors(
        cls, config: C, env_type: str
    ) -> tuple[ProcessorPipeline, ProcessorPipeline] | None:
        """The (pre, post) env processors this policy reads `env_type` through, replacing the
        env's own (`EnvConfig.env_processors`); None, the default: the env's."""
        return None


_found: dict[type[PolicyConfig], type[PolicyImplementation[Any]]] = {}


def implementation_of(config_class: type[PolicyConfig]) -> type[PolicyImplementation[Any]]:
    """The class serving `config_class`'s policy type, imported on first use."""
    found = _found.get(config_class)
    if found is None:
        found = _load(config_class)
        _found[config_class] = found
    return found


def _load(config_class: type[PolicyConfig]) -> type[PolicyImplementation[Any]]:
    name = getattr(config_class, "type_name", config_class.__name__)
    declared = f'[project.entry-points."{ENTRY_POINT_GROUP}"] {name} = "package.module:Class"'
    candidates = {ep.value: ep for ep in entry_points(group=ENTRY_POINT_GROUP, name=name)}
    if not candidates:
        raise ConfigError(
            f"no installed package implements policy type {name!r}",
            where=f"entry points {ENTRY_POINT_GROUP}",
            hint=f"install the package that provides it (rlctl's own: `uv sync` reinstalls "
            f"rlctl-adapters); a package declares its class with {declared}",
        )
    if len(candidates) > 1:
        raise ConfigError(
            f"several installed packages implement policy type {name!r}: "
            + ", ".join(sorted(candidates)),
            where=f"entry points {ENTRY_POINT_GROUP}",
            hint="uninstall all but one of them",
        )
    (entry,) = candidates.values()
    try:
        target = entry.load()
    except Exception as error:
        raise ConfigError(
            f"the implementation of policy type {name!r} cannot be imported: "
            f"{type(error).__name__}: {error}",
            where=entry.value,
            hint="install the package that provides it (see the policy's documentation)",
        ) from error
    if not (isinstance(target, type) and issubclass(target, PolicyImplementation)):
        raise ConfigError(
            f"{entry.value}, which implements policy type {name!r}, is not a "
            "PolicyImplementation (a PolicyModel, for a torch model)",
            where=entry.value,
            hint="point the entry point at the model class",
        )
    if not issubclass(config_class, target.config_class):
        raise ConfigError(
            f"{entry.value} serves {target.config_class.__name__}, not policy type {name!r} "
            f"({config_class.__name__})",
            where=entry.value,
            hint=f"set {target.__name__}.config_class, or fix the entry point's name",
        )
    return target
