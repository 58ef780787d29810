"""A sharded unit's floating-point inputs in its compute dtype, in the forward pass and in an
activation checkpoint's recomputation alike.

FSDP2's mixed precision casts a unit's inputs to the parameters' dtype (bf16) as it gathers the
unit. Before torch 2.13 it skipped that cast when the unit ran again inside the backward pass to
recompute a checkpoint (pytorch/pytorch#159359): a checkpoint that starts outside the unit (a
layer called through `checkpoint(layer, x)`, π0's joint layer step, π0-FAST's layer run part by
part) then recomputed from the float32 inputs it kept, and torch's checkpoint refused the
backward ("Recomputed values ... have different metadata"). Torch 2.7 to 2.12 are still
supported, so the cast is made here, by each unit before FSDP's hooks, every time the unit runs;
from torch 2.13 FSDP's own cast finds the inputs cast already and does nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map


def cast_unit_inputs(module: nn.Module, dtype: torch.dtype, methods: tuple[str, ...] = ()) -> None:
    """Cast the floating-point tensors `module`'s `forward` and its FSDP-registered `methods`
    are given to `dtype`, before FSDP's own hooks (call after `fully_shard` and
    `register_fsdp_forward_method`)."""
    cast = functools.partial(_floating_to, dtype)

    def before_forward(
        _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return tree_map(cast, args), tree_map(cast, kwargs)

    module.register_forward_pre_hook(before_forward, prepend=True, with_kwargs=True)
    for name in methods:
        setattr(module, name, _casting(getattr(module, name), cast))


def _casting(method: Callable[..., Any], cast: Callable[[Any], Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def cast_then_run(*args: Any, **kwargs: Any) -> Any:
        return method(*tree_map(cast, args), **tree_map(cast, kwargs))

    return cast_then_run


def _floating_to(dtype: torch.dtype, value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype:
        return value.to(dtype)
    return value
