"""Dropout whose mask comes from `rand_like`: on the CPU, torch's `bernoulli_` behind
`nn.Dropout` takes twice as long, about a tenth of an ACT training step at LeRobot's defaults.

Same distribution and scaling as `nn.Dropout` (each element kept with probability `1 - p`, kept
ones scaled by `1 / (1 - p)`), the same torch generator (so seeded and resumed runs stay
reproducible), no parameters or buffers (so checkpoints are unchanged).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Dropout(nn.Module):
    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            return torch.zeros_like(x)
        mask = torch.rand_like(x).ge_(self.p).mul_(1.0 / (1.0 - self.p))
        return x * mask

    def extra_repr(self) -> str:
        return f"p={self.p}"
