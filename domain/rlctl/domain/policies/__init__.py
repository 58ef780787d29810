"""Policy configs: the `PolicyConfig` tagged union, the built-in types and the registry.

Importing this package registers the built-in types and the structure hook that finds plugin
types (`rlctl.policies` entry points) before a policy config is structured.
"""

from rlctl.domain.policies.act import ACTConfig
from rlctl.domain.policies.config import (
    ACTION,
    OBS_ENV_STATE,
    OBS_STATE,
    RELATIVE_ACTION,
    RELATIVE_ACTION_FIELDS,
    RELATIVE_EXCLUDE_DEFAULT,
    PolicyConfig,
    dataset_policy_features,
    lerobot_config_data,
)
from rlctl.domain.policies.diffusion import DiffusionConfig
from rlctl.domain.policies.mlp import MLPConfig
from rlctl.domain.policies.registry import known_policy_types, policy_config_class
from rlctl.domain.policies.scripted import MetaWorldExpertConfig, RandomPolicyConfig
from rlctl.domain.policies.smolvla import SmolVLAConfig

__all__ = [
    "ACTION",
    "OBS_ENV_STATE",
    "OBS_STATE",
    "RELATIVE_ACTION",
    "RELATIVE_ACTION_FIELDS",
    "RELATIVE_EXCLUDE_DEFAULT",
    "ACTConfig",
    "DiffusionConfig",
    "MLPConfig",
    "MetaWorldExpertConfig",
    "PolicyConfig",
    "RandomPolicyConfig",
    "SmolVLAConfig",
    "dataset_policy_features",
    "known_policy_types",
    "lerobot_config_data",
    "policy_config_class",
]
