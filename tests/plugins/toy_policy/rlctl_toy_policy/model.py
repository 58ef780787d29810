"""The toy policy's model: the robot state through one hidden layer to a chunk of actions."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl_toy_policy.config import ToyPolicyConfig


class ToyPolicy(PolicyModel):
    config_class = ToyPolicyConfig
    config: ToyPolicyConfig

    def __init__(self, config: ToyPolicyConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        state = config.robot_state_feature
        if state is None:
            raise ValueError("the toy policy reads observation.state")
        self.net = nn.Sequential(
            nn.Linear(state.shape[0], config.hidden_dim),
            nn.ReLU(),
            nn.Linear(config.hidden_dim, config.chunk_size * config.action_dim),
        )

    def _chunk(self, batch: Batch) -> Tensor:
        out = self.net(batch["observation.state"])
        return out.view(out.shape[0], self.config.chunk_size, self.config.action_dim)

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        return self._chunk(batch)

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        error = F.mse_loss(self._chunk(batch), batch["action"], reduction="none")
        valid = ~batch["action_is_pad"].unsqueeze(-1)
        loss = (error * valid).sum() / (valid.sum() * error.shape[-1]).clamp_min(1)
        return loss, {"mse_loss": loss.item()}
