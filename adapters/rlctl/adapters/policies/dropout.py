"""Dropout whose random numbers are drawn on every core.

torch draws CPU random numbers on one thread (`bernoulli_` behind `nn.Dropout` twice as slowly
as `rand_like`), while the matrix products around it use all cores: at LeRobot's ACT defaults
the masks took a twentieth of a training step with the other core idle. Large CPU masks are
drawn here by numpy generators, one slice per core, seeded from torch's generator, so a seeded
run, and a run resumed from its saved RNG state, draws the same masks.

Same distribution and scaling as `nn.Dropout`: each element is kept with probability `1 - p`
(a uniform float32 below `p` drops it, as in torch), kept ones scaled by `1 / (1 - p)`. No
parameters or buffers, so checkpoints are unchanged.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor, nn

# Below this many elements one thread is quicker than handing out slices.
PARALLEL_MIN_ELEMENTS = 1 << 17
_SEED_BOUND = 1 << 62
_pool: ThreadPoolExecutor | None = None


def _workers() -> int:
    return max(1, min(torch.get_num_threads(), os.cpu_count() or 1))


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_workers(), thread_name_prefix="rlctl-dropout")
    return _pool


def _parallel(x: Tensor) -> bool:
    return x.device.type == "cpu" and x.numel() >= PARALLEL_MIN_ELEMENTS and _workers() > 1


def keep_mask(x: Tensor, p: float, only_positive: bool = False) -> Tensor:
    """`1 / (1 - p)` where an element of `x` is kept, 0 where dropped (float32 on the CPU).

    `only_positive` also drops where `x <= 0`: the mask of `dropout(relu(x))` (same draws).
    """
    scale = 1.0 / (1.0 - p)
    n = x.numel()
    workers = _workers()
    if not _parallel(x):
        mask = torch.rand_like(x).ge_(p)
        if only_positive:
            mask.mul_(x > 0)
        return mask.mul_(scale)
    seed = int(torch.randint(_SEED_BOUND, (1,), dtype=torch.int64).item())
    out = np.empty(n, dtype=np.float32)
    bounds = np.linspace(0, n, workers + 1).astype(np.int64)
    values = x.detach().contiguous().numpy().reshape(-1) if only_positive else None

    def fill(i: int) -> None:
        part = out[bounds[i] : bounds[i + 1]]
        np.random.Generator(np.random.SFC64([seed, i])).random(out=part, dtype=np.float32)
        keep = part >= p
        if values is not None:
            keep &= values[bounds[i] : bounds[i + 1]] > 0
        np.multiply(keep, np.float32(scale), out=part)

    # numpy lets go of the GIL while it draws and compares, so the slices are made side by side.
    list(_executor().map(fill, range(workers)))
    return torch.from_numpy(out).view(x.shape)


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """`F.dropout(x, p, training)` with the masks of this module."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return torch.zeros_like(x)
    return x * keep_mask(x, p).to(dtype=x.dtype)


def relu_dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """`dropout(relu(x), p, training)` as one product with one mask.

    The mask is zero where `x <= 0` too, so the ReLU and its backward pass (a full pass over
    ACT's largest activations, the feed-forward layers') fold into the dropout's product.
    """
    if not training or p in (0.0, 1.0) or not _parallel(x) or x.dtype != torch.float32:
        return dropout(torch.relu(x), p, training)
    return x * keep_mask(x, p, only_positive=True)


class Dropout(nn.Module):
    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
