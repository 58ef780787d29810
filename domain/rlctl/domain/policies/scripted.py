"""Policies that need no training: uniform random actions, and Meta-World's scripted experts.

They are policy types like any other (`--policy.type=random`), built for the env they act in
instead of loaded from a checkpoint.
"""

from __future__ import annotations

import attrs

from rlctl.domain.policies.config import PolicyConfig


@PolicyConfig.register("random")
@attrs.frozen(kw_only=True)
class RandomPolicyConfig(PolicyConfig):
    """Uniform actions inside the env's action bounds: the floor a trained policy must beat."""

    trainable = False

    chunk_size: int = 10
    n_action_steps: int = 10
    # None: the evaluation's seed.
    seed: int | None = None


@PolicyConfig.register("metaworld_expert")
@attrs.frozen(kw_only=True)
class MetaWorldExpertConfig(PolicyConfig):
    """Meta-World's scripted expert of each task; needs `--env.obs_type=state`."""

    trainable = False

    n_action_steps: int = 1


attrs.resolve_types(RandomPolicyConfig)
attrs.resolve_types(MetaWorldExpertConfig)
