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
imported directly, so a source checkout without installed metadata still knows them. The
mechanics are the one registry every kind of part shares (`rlctl.domain.plugins`).
"""

from __future__ import annotations

from typing import Any

from rlctl.domain.errors import ConfigError
from rlctl.domain.plugins import PluginKind
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
    "rlctl.domain.policies.pi0_fast",
    "rlctl.domain.policies.xvla",
    "rlctl.domain.policies.multi_task_dit",
    "rlctl.domain.policies.groot",
    "rlctl.domain.policies.reward_classifier",
    "rlctl.domain.policies.gaussian_actor",
    "rlctl.domain.policies.vqbet",
    "rlctl.domain.policies.tdmpc",
)

POLICY_TYPES = PluginKind(
    PolicyConfig, ENTRY_POINT_GROUP, BUILTIN_MODULES, noun="policy", where="policy.type"
)


def load_policy_plugins(*, reload: bool = False) -> dict[str, str]:
    """Import every `rlctl.policies` entry point once; return the failures by plugin name."""
    return POLICY_TYPES.load_plugins(reload=reload)


def known_policy_types() -> dict[str, type[PolicyConfig]]:
    """Every policy type by name: built-in first, then plugins, in registration order."""
    return POLICY_TYPES.known()


def policy_config_class(name: str) -> type[PolicyConfig]:
    return POLICY_TYPES.config_class(name)


def unknown_policy_type(name: Any, *, where: str) -> ConfigError:
    return POLICY_TYPES.unknown(name, where=where)
