"""The toy policy's settings: pure data, so `rlctl train --policy.type=toy --help` needs no torch.

Registered by the entry point `toy` in the group `rlctl.policies`; the model serving it is the
entry point `toy` in the group `rlctl.policy_models`, imported only when a model is built or
loaded. Its optimiser preset comes with the config, as every policy's does.
"""

from __future__ import annotations

import attrs

from rlctl.domain.optimization import OptimizerSpec
from rlctl.domain.policies.config import PolicyConfig


@attrs.frozen(kw_only=True)
class ToyPolicyConfig(PolicyConfig):
    chunk_size: int = 4
    n_action_steps: int = 4
    hidden_dim: int = 16
    optimizer_lr: float = 3e-3

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(type="adamw", lr=self.optimizer_lr)
