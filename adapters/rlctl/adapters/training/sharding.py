"""Sharded training (FSDP2): each policy's wrap units sharded over the world's device mesh.

`fully_shard` is applied to each unit the policy declares (`PolicyModel.fsdp_units`: its
transformer layers, or for π0's joint attention the pair of layers of the two experts, which run
together), then to the whole model for what is left (embeddings, heads). A unit's parameters are
gathered just before it runs and freed after; gradients are reduce-scattered, so each rank
keeps 1/N of the parameters, gradients and optimiser state. A policy that declares no units is
one unit: correct, but its whole model is gathered at once.

Methods other than `forward` that compute with a unit's parameters (the joint layer step) are
registered with FSDP (`fsdp_forward_methods` on the unit's class), so gathering and the backward
pass's hooks happen around them too.

Mixed precision follows the run's precision: bf16 parameters and compute with float32 gradient
reduction and float32 master weights (the sharded parameters) when mixed precision is on (CUDA);
float32 otherwise (the CPU, and gloo).
"""

from __future__ import annotations

from typing import Any

import structlog
import torch
from torch import nn

from rlctl.adapters.policies.base import PolicyModel
from rlctl.adapters.training.distributed import World
from rlctl.adapters.training.precision import Precision
from rlctl.domain.train_settings import DistributedSettings

log = structlog.get_logger(__name__)


def shard_model(
    model: PolicyModel, world: World, settings: DistributedSettings, precision: Precision
) -> None:
    """Shard `model` in place over `world.mesh` (its parameters become DTensors)."""
    from torch.distributed.fsdp import (
        MixedPrecisionPolicy,
        fully_shard,
        register_fsdp_forward_method,
    )

    mp = (
        MixedPrecisionPolicy(param_dtype=precision.dtype, reduce_dtype=torch.float32)
        if precision.enabled
        else MixedPrecisionPolicy()
    )
    options: dict[str, Any] = {
        "mesh": world.mesh,
        "mp_policy": mp,
        "reshard_after_forward": settings.reshard_after_forward,
    }
    _same_weights_everywhere(model, world)
    units = model.fsdp_units()
    if settings.activation_checkpointing:
        model.enable_activation_checkpointing()
    if not units and world.is_main:
        log.warning(
            "this policy type declares no FSDP wrap units: the whole model is one unit, "
            "gathered whole in each forward pass (memory as DDP's at that moment)",
            policy=model.config.type_name,
        )
    for unit in units:
        modules = list(unit) if isinstance(unit, (list, tuple)) else [unit]
        fully_shard(modules if len(modules) > 1 else modules[0], **options)
        for module in modules:
            for name in getattr(type(module), "fsdp_forward_methods", ()):
                register_fsdp_forward_method(module, name)
    fully_shard(model, **options)
    if world.is_main:
        log.info(
            "sharded",
            strategy="hsdp" if world.mesh.ndim == 2 else "fsdp",
            mesh=list(world.mesh.shape),
            units=len(units) or 1,
            precision=str(mp.param_dtype or "float32").removeprefix("torch."),
            activation_checkpointing=settings.activation_checkpointing,
        )


def _same_weights_everywhere(model: nn.Module, world: World) -> None:
    """Rank 0's initial weights on every rank, as DDP starts (each rank drew its own, and each
    will keep the rows of its shard)."""
    import torch.distributed as dist

    if not world.distributed:
        return
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            dist.broadcast(tensor.data, src=0)


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a sharded tensor (the tensor itself when it is not sharded)."""
    from torch.distributed.tensor import DTensor

    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole of a sharded scalar or small tensor, on every rank (a collective)."""
    from torch.distributed.tensor import DTensor

    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def sharded_numel(module: nn.Module) -> int:
    """Parameters this rank holds."""
    return sum(local(p).numel() for p in module.parameters())
