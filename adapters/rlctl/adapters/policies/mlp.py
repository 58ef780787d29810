"""A small MLP policy: the last `n_obs_steps` states in, a chunk of `chunk_size` actions out.

rlctl's own (LeRobot has no such policy): a baseline that trains in seconds on a CPU, for smoke
tests of the training loop and for low-dimensional tasks. It reads `observation.state` and
`observation.environment_state` and ignores cameras.

    [state, env state] of each of the n_obs_steps
        ──► Linear ─ activation ─ dropout ─ … ──► Linear ──► (chunk_size, action_dim)

The loss is the mean squared error over the chunk's real (unpadded) actions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import ACTION, OBS_ENV_STATE, OBS_STATE, MLPConfig

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}


class MLPPolicy(PolicyModel):
    config_class = MLPConfig
    config: MLPConfig

    def __init__(self, config: MLPConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        self.input_keys = [
            key for key in (OBS_STATE, OBS_ENV_STATE) if key in config.input_features
        ]
        if not self.input_keys:
            raise ConfigError(
                "the MLP policy reads 'observation.state' or 'observation.environment_state', "
                "and the inputs have neither",
                where="policy.input_features",
            )
        step_dim = sum(config.input_features[key].shape[0] for key in self.input_keys)
        layers: list[nn.Module] = []
        width = step_dim * config.n_obs_steps
        for hidden in config.hidden_dims:
            layers += [nn.Linear(width, hidden), _ACTIVATIONS[config.activation]()]
            if config.dropout > 0:
                layers.append(nn.Dropout(config.dropout))
            width = hidden
        layers.append(nn.Linear(width, config.chunk_size * config.action_dim))
        self.network = nn.Sequential(*layers)

    def _inputs(self, batch: Batch) -> Tensor:
        """`(B, n_obs_steps * step_dim)`; a single step may come without its time axis."""
        parts = []
        for key in self.input_keys:
            value = batch[key]
            parts.append(value.unsqueeze(1) if value.ndim == 2 else value)
        return torch.cat(parts, dim=-1).flatten(start_dim=1)

    def _chunk(self, batch: Batch) -> Tensor:
        out = self.network(self._inputs(batch))
        return out.view(out.shape[0], self.config.chunk_size, self.config.action_dim)

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        self.eval()
        return self._chunk(batch)

    @property
    def history_keys(self) -> list[str]:
        return self.input_keys

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        prediction = self._chunk(batch)
        target = batch[ACTION]
        error = F.mse_loss(prediction, target, reduction="none")
        is_pad = batch.get("action_is_pad")
        if is_pad is None:
            loss = error.mean()
        else:
            valid = ~is_pad.bool().unsqueeze(-1)
            loss = (error * valid).sum() / (valid.sum() * error.shape[-1]).clamp_min(1)
        return loss, {"mse_loss": loss.item()}
