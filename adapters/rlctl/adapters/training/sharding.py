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

Where the weights come from (`WeightSource`) decides who builds what:

- a fresh model: its initial weights are the first rank's draw, so the first rank builds it
  whole; the others build its parameters on the meta device (shapes, no storage:
  `empty_model`), are sharded like it, then hold storage for their shards only (`to_empty`),
  which the first rank's weights fill tensor by tensor
  (`set_model_state_dict(broadcast_from_rank0=True)`). N ranks on one host take one model's
  memory and N shards at start, not N models.
- weights in a file (fine-tuning `--policy.pretrained_path`, resuming an unsharded checkpoint):
  every rank, the first included, builds on the meta device and reads only the rows of its
  shards from the safetensors file (`safe_open(...).get_slice`): no rank ever holds the model.
- a resumed sharded checkpoint: every rank builds on the meta device and the checkpoint's
  shards fill its storage (`load_sharded`, torch.distributed.checkpoint); the pretrained_model
  weights are not read at all.

Buffers are built as usual on every rank (small; the non-persistent ones are in no file) and
broadcast from the first rank whole.

Mixed precision follows the run's precision: bf16 parameters and compute with float32 gradient
reduction and float32 master weights (the sharded parameters) when mixed precision is on (CUDA);
float32 otherwise (the CPU, and gloo). Each unit casts its inputs to bf16 itself, before FSDP's
hooks, so an activation checkpoint recomputes from the inputs the forward pass used on every
supported torch (`unit_inputs`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import structlog
import torch
from torch import nn

from rlctl.adapters.policies.base import PolicyModel, policy_class
from rlctl.adapters.policies.checkpoint import untied_state
from rlctl.adapters.policies.errors import CheckpointError
from rlctl.adapters.policies.vla.loading import materialize_buffers
from rlctl.adapters.training.distributed import World
from rlctl.adapters.training.precision import Precision
from rlctl.adapters.training.unit_inputs import cast_unit_inputs
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.train_settings import DistributedSettings

log = structlog.get_logger(__name__)


@attrs.frozen
class WeightSource:
    """Where a sharded run's weights come from once the model is sharded: `file`, a
    safetensors file each rank reads its own rows of; `restored`, the resumed sharded
    checkpoint (`load_sharded`, after the optimiser is built); neither, the first rank's
    model (a fresh one), broadcast. The same on every rank."""

    file: Path | None = None
    restored: bool = False

    @property
    def first_rank(self) -> bool:
        return self.file is None and not self.restored


FIRST_RANK = WeightSource()


def shard_model(
    model: PolicyModel,
    world: World,
    settings: DistributedSettings,
    precision: Precision,
    weights: WeightSource = FIRST_RANK,
) -> None:
    """Shard `model` in place over `world.mesh` (its parameters become DTensors), each rank's
    shards filled from `weights` (left for the caller to fill when `weights.restored`)."""
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
    from_first = weights.first_rank
    first = dict(model.state_dict()) if from_first and world.distributed and world.is_main else {}
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
            methods = tuple(getattr(type(module), "fsdp_forward_methods", ()))
            for name in methods:
                register_fsdp_forward_method(module, name)
            if mp.param_dtype is not None:
                cast_unit_inputs(module, mp.param_dtype, methods)
    fully_shard(model, **options)
    if from_first:
        _first_ranks_weights(model, world, first)
    else:
        _own_weights(model, world, weights)
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
    if not world.distributed:
        # Measured on an H100 (π0, bf16): one-process FSDP steps took 1.3x (4 B parameters)
        # to 2x (110 M) the plain process's, for the same memory.
        log.warning(
            f"--distributed.strategy={settings.strategy} in one process shards nothing: each "
            "step still gathers every unit, slower than training without it for the same memory",
            hint="drop --distributed.strategy, or launch several processes "
            "(torchrun --nproc-per-node=N)",
        )


def sharded_over_ranks(world: World) -> bool:
    """Whether the model is sharded over several processes (not a mesh of one)."""
    return world.mesh is not None and world.distributed


def builds_on_meta(world: World, weights: WeightSource = FIRST_RANK) -> bool:
    """Whether this rank builds its model without storage: in a sharded run, every rank when
    the weights come from a file or the resumed checkpoint, the ranks after the first when
    they come from the first rank's freshly built model."""
    return sharded_over_ranks(world) and (not world.is_main or not weights.first_rank)


def empty_model(config: PolicyConfig, *, computed_buffers: bool = False) -> PolicyModel | None:
    """The model `config` describes with its parameters on the meta device (shapes, no storage,
    no backbone read), for a rank where `builds_on_meta`: `shard_model` gives it its shards of
    rank 0's weights.

    Each parameter moves to the meta device as it is registered, so one at most is ever held;
    the initialisers then run on the meta device (no compute). Buffers and the plain tensors
    models keep (a noise scheduler's tables) are built as usual: they are small, and a tensor
    that is no parameter or buffer is in no state dict to fill it from (a buffer computed on a
    parameter's device is computed again off it where `computed_buffers`: no rank 0 builds
    them). None (with a warning) where the type computes with its parameters while it is
    built, or such a buffer cannot be computed: build that one whole."""
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
        model = policy_class(config)(config, load_backbone_weights=False)
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
    if not computed_buffers:
        return model  # rank 0's buffers are broadcast
    try:
        # A buffer computed on a parameter's device (SigLIP's positions, Gemma's embedding
        # scale) came out on the meta device too: computed again, as after a meta load (the
        # persistent ones come with the weights).
        materialize_buffers(model, config.type_name, non_persistent=True)
    except ConfigError as err:
        log.warning(
            "a buffer of this policy type cannot be computed without its weights: this rank "
            "builds it whole (memory as rank 0's until sharded)",
            policy=config.type_name,
            reason=err.message,
        )
        return None
    return model


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


def _own_weights(model: nn.Module, world: World, weights: WeightSource) -> None:
    """Storage for this rank's shards, filled from `weights.file` (rows of this rank only),
    or left for the resumed checkpoint; buffers as built, then the first rank's."""
    import torch.distributed as dist

    if any(local(t).is_meta for t in model.parameters()):
        built = dict(model.named_buffers())  # real: `to_empty` would leave them uninitialised
        model.to_empty(device=world.device)
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                if not built[name].is_meta:  # a persistent one: the weights hold it
                    buffer.copy_(built[name])
            if weights.file is None:  # no garbage (a NaN) in the optimiser's first look
                for parameter in model.parameters():
                    local(parameter).zero_()
        del built
    if weights.file is not None:
        read_own_rows(model, weights.file, world.mesh)
    if world.distributed:
        with torch.no_grad():
            for buffer in model.buffers():
                dist.broadcast(buffer.data, src=0)


def read_own_rows(model: nn.Module, path: Path, mesh: Any) -> None:
    """The tensors of the safetensors file `path` into `model`, each sharded parameter reading
    only the part this rank holds (those bytes of the file, no more: read straight into its
    storage where they are one range of the same dtype, else through `get_slice`); buffers and
    unsharded parameters whole. Keys and shapes were checked against the model beforehand
    (`check_weights_file`); a tensor absent from the file keeps its value. The part a rank holds
    follows from its place in `mesh`, the one the model was sharded over (as FSDP takes it)."""
    import torch.distributed as dist
    from safetensors import SafetensorError, safe_open
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    read = 0
    try:
        layout = _file_layout(path)
        with (
            safe_open(str(path), framework="pt", device="cpu") as file,
            _opened(path) as descriptor,
        ):
            names = set(file.keys())
            with torch.no_grad():
                for name, tensor in untied_state(model, keep=names).items():
                    if name not in names:
                        continue
                    if not isinstance(tensor, DTensor):
                        whole = file.get_tensor(name)
                        read += whole.numel() * whole.element_size()
                        tensor.copy_(whole)
                        continue
                    target = tensor.to_local()
                    if not target.numel():
                        continue
                    shape, offset = compute_local_shape_and_global_offset(
                        tensor.shape, mesh, tensor.placements
                    )
                    rows = _rows_in_place(descriptor, layout, name, target, shape, offset)
                    if rows:  # read straight into this rank's storage
                        read += rows
                        continue
                    part = (
                        file.get_slice(name)[
                            tuple(slice(o, o + n) for o, n in zip(offset, shape, strict=True))
                        ]
                        if tensor.ndim
                        else file.get_tensor(name)
                    )
                    read += part.numel() * part.element_size()
                    target.copy_(part.reshape(target.shape))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f"cannot read the weights: {err}",
            where=str(path),
            hint="the file is damaged or not safetensors: save or download the checkpoint again",
        ) from err
    log.info(
        "read this rank's rows of the weights",
        rank=dist.get_rank() if dist.is_initialized() else 0,
        file=str(path),
        bytes=read,
        of=path.stat().st_size,
    )


@contextmanager
def _opened(path: Path) -> Iterator[int]:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def _file_layout(path: Path) -> dict[str, Any]:
    """The safetensors header: each tensor's dtype, shape and data offsets, with `__start__`,
    where the data begins."""
    with path.open("rb") as file:
        size = int.from_bytes(file.read(8), "little")
        if not 0 < size <= 100_000_000:
            raise ValueError(f"a safetensors header of {size} bytes")
        layout: dict[str, Any] = json.loads(file.read(size))
    layout["__start__"] = 8 + size
    return layout


def _rows_in_place(
    descriptor: int,
    layout: dict[str, Any],
    name: str,
    target: torch.Tensor,
    shape: tuple[int, ...],
    offset: tuple[int, ...],
) -> int:
    """This rank's rows of tensor `name` read from the file straight into `target` (`pread`:
    no mapping of the file, no copy in between), where they are one contiguous range of the
    same dtype on the CPU; the bytes read, 0 where not (read otherwise)."""
    from rlctl.adapters.training.sharded_checkpoint import SAFETENSORS_DTYPES

    entry = layout.get(name)
    whole_rows = (
        target.ndim >= 1
        and not any(offset[1:])
        and list(shape[1:]) == list(entry["shape"][1:] if entry else [])
    )
    if (
        entry is None
        or not whole_rows
        or target.device.type != "cpu"
        or not target.is_contiguous()
        or SAFETENSORS_DTYPES.get(target.dtype) != entry["dtype"]
        or tuple(target.shape) != tuple(shape)
    ):
        return 0
    row_bytes = target[0].numel() * target.element_size() if target.shape[0] else 0
    start = layout["__start__"] + entry["data_offsets"][0] + offset[0] * row_bytes
    view = memoryview(target.view(-1).view(torch.uint8).numpy())
    done = 0
    while done < len(view):
        got = os.preadv(descriptor, [view[done:]], start + done)
        if got <= 0:
            raise ValueError(f"{name}: the file ends before its data")
        done += got
    return done


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
