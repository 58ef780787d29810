"""A CPU speed path for training: dropout whose random numbers are drawn on every core.

torch draws CPU random numbers on one thread (`bernoulli_` behind `nn.Dropout` twice as slowly
as `rand_like`), while the matrix products around it use all cores: at LeRobot's ACT defaults
the masks took a twentieth of a training step with the other core idle. Large CPU masks are
drawn here by numpy generators, one slice per core, seeded from torch's generator, so a seeded
run, and a run resumed from its saved RNG state, draws the same masks.

Same distribution and scaling as `nn.Dropout`: each element is kept with probability `1 - p`
(a uniform float32 below `p` drops it, as in torch), kept ones scaled by `1 / (1 - p)`; only
the draws differ from torch's. The modules here are `nn.Dropout`s with no state of their own,
so checkpoints are unchanged; `cpu_kernels` turns a model's `nn.Dropout`s into them when a
training session is built. The threads belong to that session (`DrawThreads`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

# Below this many elements one thread is quicker than handing out slices.
PARALLEL_MIN_ELEMENTS = 1 << 17
_SEED_BOUND = 1 << 62


class DrawThreads:
    """The threads that draw large masks: none until the first such draw, none after `close`.

    A training session owns one and its model's dropouts share it; nothing starts at import.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    @property
    def workers(self) -> int:
        return max(1, min(torch.get_num_threads(), os.cpu_count() or 1))

    def run(self, fill: Callable[[int], None], n: int) -> None:
        """`fill(0)` … `fill(n - 1)` side by side."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="rlctl-dropout")
        list(self._pool.map(fill, range(n)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __deepcopy__(self, memo: dict[int, Any]) -> DrawThreads:
        return self  # a copied model (an EMA) shares its original's threads


def _parallel(x: Tensor, threads: DrawThreads) -> bool:
    return x.device.type == "cpu" and x.numel() >= PARALLEL_MIN_ELEMENTS and threads.workers > 1


def keep_mask(x: Tensor, p: float, threads: DrawThreads, only_positive: bool = False) -> Tensor:
    """`1 / (1 - p)` where an element of `x` is kept, 0 where dropped (float32 on the CPU).

    `only_positive` also drops where `x <= 0`: the mask of `dropout(relu(x))` (same draws).
    """
    if not _parallel(x, threads):
        mask = torch.rand_like(x).ge_(p)
        if only_positive:
            mask.mul_(x > 0)
        return mask.mul_(1.0 / (1.0 - p))
    drawn, _ = _draw(x, p, threads, only_positive=only_positive, product=False)
    return torch.from_numpy(drawn).view(x.shape)


# Elements a thread draws, compares and scales at a time: a block stays in the cache from the
# draw to the product, so each tensor is read and written once rather than once per step.
# Much smaller blocks lose more to taking the GIL back after each numpy call.
_BLOCK = 1 << 17


def _draw(
    x: Tensor, p: float, threads: DrawThreads, *, only_positive: bool, product: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """The flat mask, and with `product` also `x * mask`, made one slice per core."""
    scale = np.float32(1.0 / (1.0 - p))
    n = x.numel()
    workers = threads.workers
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
    threads.run(fill, workers)
    return mask, out


class _ReluDropout(torch.autograd.Function):
    """`x * mask` with the product made alongside the mask, in the same pass over `x`."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, p: float, threads: DrawThreads) -> Tensor:
        mask, out = _draw(x, p, threads, only_positive=True, product=True)
        assert out is not None
        ctx.save_for_backward(torch.from_numpy(mask).view(x.shape))
        return torch.from_numpy(out).view(x.shape)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (mask,) = ctx.saved_tensors
        return grad * mask, None, None


def dropout(x: Tensor, p: float, training: bool, threads: DrawThreads) -> Tensor:
    """`F.dropout(x, p, training)` with the masks of this module."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return torch.zeros_like(x)
    return x * keep_mask(x, p, threads).to(dtype=x.dtype)


def relu_dropout(x: Tensor, p: float, training: bool, threads: DrawThreads) -> Tensor:
    """`dropout(relu(x), p, training)` as one product with one mask.

    The mask is zero where `x <= 0` too, so the ReLU and its backward pass (a full pass over
    ACT's largest activations, the feed-forward layers') fold into the dropout's product.
    """
    if not training or p in (0.0, 1.0) or not _parallel(x, threads) or x.dtype != torch.float32:
        return dropout(torch.relu(x), p, training, threads)
    return _ReluDropout.apply(x, p, threads)


class ThreadedDropout(nn.Dropout):
    """An `nn.Dropout` drawing its masks with `threads` (set by `cpu_kernels`)."""

    threads: DrawThreads

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training, self.threads)


class ReluDropout(ThreadedDropout):
    """`dropout(relu(x))`: stands for a ReLU followed by an `nn.Dropout` (`act_training`)."""

    def forward(self, x: Tensor) -> Tensor:
        return relu_dropout(x, self.p, self.training, self.threads)
