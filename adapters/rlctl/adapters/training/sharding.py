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

Only the first rank builds the whole model. The others build its parameters on the meta device
(shapes, no storage: `empty_model`), are sharded like it, then hold storage for their shards
only (`to_empty`), which the first rank's weights fill tensor by tensor
(`set_model_state_dict(broadcast_from_rank0=True)`), buffers — the non-persistent ones too —
broadcast whole. N ranks on one host take one model's memory and N shards at start, not N models.

Mixed precision follows the run's precision: bf16 parameters and compute with float32 gradient
reduction and float32 master weights (the sharded parameters) when mixed precision is on (CUDA);
float32 otherwise (the CPU, and gloo).
"""

from __future__ import annotations

from typing import Any

import structlog
import torch
from torch import nn

from rlctl.adapters.policies.base import PolicyModel, policy_class
from rlctl.adapters.training.distributed import World
from rlctl.adapters.training.precision import Precision
from rlctl.domain.policies import PolicyConfig
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
    units = model.fsdp_units()
    if settings.activation_checkpointing:
        model.enable_activation_checkpointing()
    # The first rank's whole state, by reference (no copy), to fill the others' shards from.
    first = dict(model.state_dict()) if world.distributed and world.is_main else {}
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
    _first_ranks_weights(model, world, first)
    del first
    if world.is_main:
        log.info(
            "sharded",
            strategy="hsdp" if world.mesh.ndim == 2 else "fsdp",
            mesh=list(world.mesh.shape),
            units=len(units) or 1,
            precision=str(mp.param_dtype or "float32").removeprefix("torch."),
            activation_checkpointing=settings.activation_checkpointing,
        )


def builds_on_meta(world: World) -> bool:
    """Whether this rank builds its model without storage: a sharded run's ranks after the
    first, whose weights come from the first rank's once sharded."""
    return world.mesh is not None and world.distributed and not world.is_main


def empty_model(config: PolicyConfig) -> PolicyModel | None:
    """The model `config` describes with its parameters on the meta device (shapes, no storage,
    no backbone read), for a rank where `builds_on_meta`: `shard_model` gives it its shards of
    rank 0's weights.

    Each parameter moves to the meta device as it is registered, so one at most is ever held;
    the initialisers then run on the meta device (no compute). Buffers and the plain tensors
    models keep (a noise scheduler's tables) are built as usual: they are small, and a tensor
    that is no parameter or buffer is in no state dict to fill it from. None (with a warning)
    where the type computes with its parameters while it is built: build that one whole."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        if param is None or param.is_meta or type(param) is not nn.Parameter:
            return  # a tied parameter, already moved, stays the same object
        empty = nn.Parameter(param.detach().to("meta"), requires_grad=param.requires_grad)
        empty.__dict__.update(param.__dict__)
        module._parameters[name] = empty

    nn.Module.register_parameter = on_meta  # type: ignore[method-assign]
    try:
        return policy_class(config)(config, load_backbone_weights=False)
    except (RuntimeError, NotImplementedError) as err:  # a computation on the meta device
        log.warning(
            "this policy type computes with its weights while it is built: this rank builds "
            "it whole (memory as rank 0's until sharded)",
            policy=config.type_name,
            reason=str(err).splitlines()[0][:200],
        )
        return None
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]


def _first_ranks_weights(model: nn.Module, world: World, first: dict[str, Any]) -> None:
    """Rank 0's weights and buffers on every rank, each rank keeping its shards (each rank drew
    its own initial weights, or none on the meta device; DDP starts from rank 0's likewise)."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if not world.distributed:
        return
    if any(local(t).is_meta for t in [*model.parameters(), *model.buffers()]):
        model.to_empty(device=world.device)  # storage for this rank's shards, uninitialised
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, first, options=options)
    with torch.no_grad():
        for buffer in model.buffers():  # unsharded; the non-persistent ones are in no state dict
            dist.broadcast(buffer.data, src=0)


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
