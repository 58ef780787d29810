"""Which env types exist: the built-in ones, and those other packages register.

A third-party package adds an env type without editing rlctl by declaring an entry point in
the group `rlctl.envs`, named after the type, pointing at its `EnvConfig` subclass (or at a
module that registers one with `@EnvConfig.register("name")` when imported):

    [project.entry-points."rlctl.envs"]
    my_sim = "my_package.rlctl_env:MySimEnv"

The mechanics are the one registry every kind of part shares (`rlctl.domain.plugins`): entry
points are read the first time an env config is structured or a type is looked up, and a plugin
that fails to import is named when its type is asked for.
"""

from __future__ import annotations

from typing import Any

from rlctl.adapters.sim.config import EnvConfig
from rlctl.domain.plugins import PluginKind

ENTRY_POINT_GROUP = "rlctl.envs"
BUILTIN_MODULES = (
    "rlctl.adapters.sim.envs.pusht",
    "rlctl.adapters.sim.envs.aloha",
    "rlctl.adapters.sim.envs.metaworld",
    "rlctl.adapters.sim.envs.libero",
    "rlctl.adapters.sim.envs.gym_generic",
    "rlctl.adapters.sim.envs.hil",
)

ENV_TYPES = PluginKind(EnvConfig, ENTRY_POINT_GROUP, BUILTIN_MODULES, noun="env", where="env.type")


def load_builtin_env_types() -> None:
    ENV_TYPES.load_builtins()


def load_env_plugins(*, reload: bool = False) -> dict[str, str]:
    """Import every `rlctl.envs` entry point once; return the failures by plugin name."""
    return ENV_TYPES.load_plugins(reload=reload)


def known_env_types() -> dict[str, type[EnvConfig]]:
    """Every env type by name: built-in first, then plugins, in registration order."""
    return ENV_TYPES.known()


def env_config_class(name: str) -> type[EnvConfig]:
    return ENV_TYPES.config_class(name)


def make_env_config(type_name: str, **fields: Any) -> EnvConfig:
    """`make_env_config("pusht", episode_length=50)`, checked like a config file."""
    return ENV_TYPES.make(type_name, **fields)
