"""Which policy types exist: the built-in ones, and those other packages register.

A package adds a policy type without editing rlctl by declaring an entry point in the group
`rlctl.policies`, named after the type, pointing at its `PolicyConfig` subclass, or at a module
that registers one when imported; the class serving the type is declared under the same name in
the group `rlctl.policy_models`, which only the adapters read:

    [project.entry-points."rlctl.policies"]
    my_policy = "my_package.config:MyPolicyConfig"
    [project.entry-points."rlctl.policy_models"]
    my_policy = "my_package.model:MyPolicy"

rlctl's own types are declared the same way (in the adapters' distribution) and are also
imported directly, so a source checkout without installed metadata still knows them. Entry
points are read the first time a policy config is structured or a type is looked up; a plugin
that fails to import does not hide the others, and its error is named when its type is asked for.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points
from typing import Any

from rlctl.domain.config import converter, registered_types
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies.config import PolicyConfig

ENTRY_POINT_GROUP = "rlctl.policies"
BUILTIN_MODULES = (
    "rlctl.domain.policies.act",
    "rlctl.domain.policies.diffusion",
    "rlctl.domain.policies.mlp",
    "rlctl.domain.policies.scripted",
    "rlctl.domain.policies.smolvla",
    "rlctl.domain.policies.pi0",
    "rlctl.domain.policies.pi05",
)

_state = {"plugins_loaded": False}
_plugin_errors: dict[str, str] = {}


def load_policy_plugins(*, reload: bool = False) -> dict[str, str]:
    """Import every `rlctl.policies` entry point once; return the failures by plugin name."""
    if _state["plugins_loaded"] and not reload:
        return dict(_plugin_errors)
    _state["plugins_loaded"] = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in registered_types(PolicyConfig) and not reload:
            continue
        try:
            target = ep.load()
        except Exception as error:
            _plugin_errors[ep.name] = f"{ep.value}: {type(error).__name__}: {error}"
            # The domain logs through the standard library; the CLI routes it to structlog.
            logging.getLogger(__name__).warning(
                "policy plugin %s failed to load: %s", ep.name, error
            )
            continue
        _plugin_errors.pop(ep.name, None)
        if (
            isinstance(target, type)
            and issubclass(target, PolicyConfig)
            and target not in registered_types(PolicyConfig).values()
        ):
            PolicyConfig.register(ep.name)(target)
    return dict(_plugin_errors)


def known_policy_types() -> dict[str, type[PolicyConfig]]:
    """Every policy type by name: built-in first, then plugins, in registration order."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    load_policy_plugins()
    return registered_types(PolicyConfig)


def policy_config_class(name: str) -> type[PolicyConfig]:
    known = known_policy_types()
    if name in known:
        return known[name]
    raise unknown_policy_type(name, where="policy.type")


def unknown_policy_type(name: Any, *, where: str) -> ConfigError:
    known = known_policy_types()
    hint = f"known policy types: {', '.join(known) or '(none)'}"
    if name in _plugin_errors:
        hint = f"the plugin providing it failed to load ({_plugin_errors[name]}); {hint}"
    return ConfigError(f"unknown policy type {name!r}", where=where, hint=hint)


_union_hook = converter.get_structure_hook(PolicyConfig)


def _structure_policy_config(data: Any, cls: type) -> PolicyConfig:
    # Entry points are read before the first policy config is structured, so
    # `--policy.type=NAME` and a checkpoint's config.json find a plugin's type.
    known = known_policy_types()
    name = data.get("type") if isinstance(data, dict) else None
    if isinstance(name, str) and name not in known:
        raise unknown_policy_type(name, where="policy.type")
    config: PolicyConfig = _union_hook(data, cls)
    return config


converter.register_structure_hook_func(lambda t: t is PolicyConfig, _structure_policy_config)
