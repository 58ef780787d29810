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
from typing import Any

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
    if not _parallel(x):
        mask = torch.rand_like(x).ge_(p)
        if only_positive:
            mask.mul_(x > 0)
        return mask.mul_(1.0 / (1.0 - p))
    mask, _ = _draw(x, p, only_positive=only_positive, product=False)
    return torch.from_numpy(mask).view(x.shape)


# Elements a thread draws, compares and scales at a time: a block stays in the cache from the
# draw to the product, so each tensor is read and written once rather than once per step.
# Much smaller blocks lose more to taking the GIL back after each numpy call.
_BLOCK = 1 << 17


def _draw(
    x: Tensor, p: float, *, only_positive: bool, product: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """The flat mask, and with `product` also `x * mask`, made one slice per core."""
    scale = np.float32(1.0 / (1.0 - p))
    n = x.numel()
    workers = _workers()
    seed = int(torch.randint(_SEED_BOUND, (1,), dtype=torch.int64).item())
    mask = np.empty(n, dtype=np.float32)
    out = np.empty(n, dtype=np.float32) if product else None
    bounds = np.linspace(0, n, workers + 1).astype(np.int64)
    values = x.detach().contiguous().numpy().reshape(-1) if only_positive or product else None
    signs = values if only_positive else None
    factors = values if product else None

    def fill(i: int) -> None:
        # One generator per slice, drawing its slice in order: the same numbers whatever
        # the block size.
        generator = np.random.Generator(np.random.SFC64([seed, i]))
        keep = np.empty(_BLOCK, dtype=bool)
        positive = np.empty(_BLOCK, dtype=bool)
        for start in range(int(bounds[i]), int(bounds[i + 1]), _BLOCK):
            stop = min(start + _BLOCK, int(bounds[i + 1]))
            part, kept = mask[start:stop], keep[: stop - start]
            generator.random(out=part, dtype=np.float32)
            np.greater_equal(part, p, out=kept)
            if signs is not None:
                is_positive = positive[: stop - start]
                np.greater(signs[start:stop], 0, out=is_positive)
                np.logical_and(kept, is_positive, out=kept)
            np.multiply(kept, scale, out=part)
            if out is not None and factors is not None:
                np.multiply(factors[start:stop], part, out=out[start:stop])

    # numpy lets go of the GIL while it draws and compares, so the slices are made side by side.
    list(_executor().map(fill, range(workers)))
    return mask, out


class _ReluDropout(torch.autograd.Function):
    """`x * mask` with the product made alongside the mask, in the same pass over `x`."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, p: float) -> Tensor:
        mask, out = _draw(x, p, only_positive=True, product=True)
        assert out is not None
        ctx.save_for_backward(torch.from_numpy(mask).view(x.shape))
        return torch.from_numpy(out).view(x.shape)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (mask,) = ctx.saved_tensors
        return grad * mask, None


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
    return _ReluDropout.apply(x, p)


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
