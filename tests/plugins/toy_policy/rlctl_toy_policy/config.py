"""The toy policy's settings: pure data, so `rlctl train --policy.type=toy --help` needs no torch.

Registered by the entry point `toy` in the group `rlctl.policies`; `implementation` names the
model module, imported only when a model is built or loaded.
"""

from __future__ import annotations

import attrs

from rlctl.domain.policies.config import PolicyConfig


@attrs.frozen(kw_only=True)
class ToyPolicyConfig(PolicyConfig):
    implementation = "rlctl_toy_policy.model:ToyPolicy"

    chunk_size: int = 4
    n_action_steps: int = 4
    hidden_dim: int = 16

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))
