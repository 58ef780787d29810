"""Which env types exist: the built-in ones, and those other packages register.

A third-party package adds an env type without editing rlctl by declaring an entry point in
the group `rlctl.envs`, named after the type, pointing at its `EnvConfig` subclass (or at a
module that registers one with `@EnvConfig.register("name")` when imported):

    [project.entry-points."rlctl.envs"]
    my_sim = "my_package.rlctl_env:MySimEnv"

Entry points are read the first time an env config is structured or a type is looked up, so
plain imports of rlctl stay cheap. A plugin that fails to import does not hide the others; its
error is named when its type is asked for.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from rlctl.adapters.sim.config import EnvConfig
from rlctl.domain.config import converter, registered_types, structure
from rlctl.domain.errors import ConfigError

ENTRY_POINT_GROUP = "rlctl.envs"
BUILTIN_MODULES = (
    "rlctl.adapters.sim.envs.pusht",
    "rlctl.adapters.sim.envs.aloha",
    "rlctl.adapters.sim.envs.metaworld",
    "rlctl.adapters.sim.envs.libero",
    "rlctl.adapters.sim.envs.gym_generic",
)

_plugins_loaded = False
_plugin_errors: dict[str, str] = {}


def load_builtin_env_types() -> None:
    for module in BUILTIN_MODULES:
        importlib.import_module(module)


def load_env_plugins(*, reload: bool = False) -> dict[str, str]:
    """Import every `rlctl.envs` entry point once; return the failures by plugin name."""
    global _plugins_loaded
    if _plugins_loaded and not reload:
        return dict(_plugin_errors)
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        known = registered_types(EnvConfig)
        if ep.name in known and not reload:
            continue
        try:
            target = ep.load()
        except Exception as error:
            _plugin_errors[ep.name] = f"{ep.value}: {type(error).__name__}: {error}"
            import structlog

            structlog.get_logger(__name__).warning(
                "env plugin failed to load", plugin=ep.name, error=str(error)
            )
            continue
        _plugin_errors.pop(ep.name, None)
        if (
            isinstance(target, type)
            and issubclass(target, EnvConfig)
            and target not in registered_types(EnvConfig).values()
        ):
            EnvConfig.register(ep.name)(target)
    return dict(_plugin_errors)


def known_env_types() -> dict[str, type[EnvConfig]]:
    """Every env type by name: built-in first, then plugins, in registration order."""
    load_builtin_env_types()
    load_env_plugins()
    return registered_types(EnvConfig)


def env_config_class(name: str) -> type[EnvConfig]:
    known = known_env_types()
    if name in known:
        return known[name]
    raise _unknown(name, known)


def make_env_config(type_name: str, **fields: Any) -> EnvConfig:
    """`make_env_config("pusht", episode_length=50)`, checked like a config file."""
    env_config_class(type_name)
    return structure({"type": type_name, **fields}, EnvConfig)


def _unknown(name: str, known: dict[str, type[EnvConfig]]) -> ConfigError:
    hint = f"known types: {', '.join(known) or '(none)'}"
    if name in _plugin_errors:
        hint = f"the plugin providing it failed to load ({_plugin_errors[name]}); {hint}"
    return ConfigError(f"unknown env type {name!r}", where="env.type", hint=hint)


_union_hook = converter.get_structure_hook(EnvConfig)


def _structure_env_config(data: Any, cls: type) -> EnvConfig:
    # Entry points are read before the first env config is structured, so `--env.type=NAME`
    # finds a plugin's type.
    known = known_env_types()
    name = data.get("type") if isinstance(data, dict) else None
    if isinstance(name, str) and name not in known:
        raise _unknown(name, known)
    return _union_hook(data, cls)


converter.register_structure_hook_func(lambda t: t is EnvConfig, _structure_env_config)
