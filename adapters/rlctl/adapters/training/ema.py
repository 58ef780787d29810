"""An exponential moving average of a model's weights, with the original Diffusion Policy's
warm-up: decay = 1 - (1 + step / inv_gamma) ** -power, clamped to [min_decay, max_decay],
0 until `update_after_step` (so the average starts as a copy)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from rlctl.domain.train_settings import EmaSettings


def ema_decay(settings: EmaSettings, step: int) -> float:
    step = max(0, step - settings.update_after_step - 1)
    if step <= 0:
        return 0.0
    value = 1.0 - (1.0 + step / settings.inv_gamma) ** -settings.power
    return max(settings.min_decay, min(value, settings.max_decay))


class EmaModel:
    def __init__(self, model: nn.Module, settings: EmaSettings) -> None:
        self.settings = settings
        self.model = copy.deepcopy(model).eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        """Fold in `model`'s weights after optimisation step `step` (1-based)."""
        decay = ema_decay(self.settings, step)
        for average, live in zip(self.model.parameters(), model.parameters()):
            if live.requires_grad:
                average.lerp_(live.detach(), 1.0 - decay)
            else:
                average.copy_(live)
        for average, live in zip(self.model.buffers(), model.buffers()):
            average.copy_(live)
