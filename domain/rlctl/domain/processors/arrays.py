"""The few operations numpy arrays and torch tensors spell differently, kept in one place.

Steps are written against what both share (arithmetic, indexing, `.shape`, `.ndim`, `.clip`).
What they do not share (turning a numpy constant into the input's own kind of array, casting,
replacing zeros, stacking) dispatches here on a method only torch tensors have, so the domain
never imports torch and a pipeline built in a test on numpy runs unchanged on CUDA tensors in
training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlctl.domain.errors import InvalidInput


def is_tensor(x: Any) -> bool:
    """True for torch tensors; duck-typed so that this module never imports torch."""
    return hasattr(x, "new_tensor")


def require_array(x: Any, where: str) -> None:
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        raise InvalidInput(
            f"expected a numpy array or a torch tensor, got {type(x).__name__}",
            where=where,
            hint="convert lists and Python numbers to arrays before running the pipeline",
        )


def constant_like(value: np.ndarray, like: Any) -> Any:
    """`value` as the same kind of array as `like`: a tensor on its device, with its dtype."""
    if is_tensor(like):
        return like.new_tensor(value)
    return value.astype(like.dtype, copy=False)


def cast_like(x: Any, like: Any) -> Any:
    """`x` (an input array) with the dtype, and for tensors the device, of `like`."""
    if is_tensor(like):
        return x.to(like) if is_tensor(x) else like.new_tensor(x)
    return x.astype(like.dtype, copy=False)


def ensure_floating(x: Any) -> Any:
    """Integer or boolean inputs become float32; float inputs keep their precision."""
    if is_tensor(x):
        return x if x.is_floating_point() else x.float()
    if np.issubdtype(x.dtype, np.floating):
        return x
    return x.astype(np.float32)


def replace_zeros(x: Any, fill: float) -> Any:
    """`x` with its exact zeros replaced by `fill`, in `x`'s dtype (LeRobot's `torch.where`)."""
    zero = x == 0
    if is_tensor(x):
        return x.masked_fill(zero, fill)
    return np.where(zero, x.dtype.type(fill), x)


def stack(values: Sequence[Any], axis: int) -> Any:
    """`values` (arrays of one shape) stacked along a new `axis`, as `np.stack` and
    `torch.stack` do; tensors keep the first one's device and dtype."""
    first = values[0]
    if not is_tensor(first):
        return np.stack(values, axis=axis)
    axis = axis % (first.ndim + 1)
    out = first.new_empty((*first.shape[:axis], len(values), *first.shape[axis:]))
    for i, value in enumerate(values):
        out[(slice(None),) * axis + (i,)] = value
    return out


def concatenate(values: Sequence[Any], axis: int) -> Any:
    """`values` joined along an existing `axis`, as `np.concatenate` and `torch.cat` do;
    tensors keep the first one's device and dtype."""
    first = values[0]
    if not is_tensor(first):
        return np.concatenate(values, axis=axis)
    axis = axis % first.ndim
    sizes = [int(value.shape[axis]) for value in values]
    out = first.new_empty((*first.shape[:axis], sum(sizes), *first.shape[axis + 1 :]))
    start = 0
    for value, size in zip(values, sizes, strict=True):
        out[(slice(None),) * axis + (slice(start, start + size),)] = value
        start += size
    return out
