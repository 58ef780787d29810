"""Checkpoints of a sharded run, written by every rank at once and read on any topology.

    checkpoints/<step>/
        pretrained_model/           LeRobot's folder: model.safetensors, config.json, processors
        training_state/
            distributed/            torch distributed checkpoint (DCP): .metadata + one
                                    __<rank>_0.distcp per rank, the model's and the optimiser's
                                    shards keyed by parameter name
            scheduler_state.json, rng_state.safetensors, training_step.json   (as unsharded)

DCP keys every tensor by name with its global shape, so `dcp.load` reshards on read: a run
written by 4 ranks resumes on 2, on 1, or in one process without a process group.

`pretrained_model/model.safetensors` is written without gathering the model anywhere: every
tensor's place in the file follows from the global shapes (known on every rank), rank 0 writes
the header, and each rank writes the rows it holds (FSDP shards on the first dimension, so a
rank's rows are one contiguous byte range) straight into the file. Peak memory is the rank's own
shard; the file is the ordinary one LeRobot and `rlctl` load. (`get_model_state_dict` with
`full_state_dict` and `cpu_offload` would instead hold the whole model in rank 0's memory.)
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from rlctl.adapters.policies.checkpoint import untied_state
from rlctl.adapters.policies.errors import CheckpointMismatch
from rlctl.adapters.training import state_files
from rlctl.adapters.training.distributed import World

DCP_DIR = "distributed"

SAFETENSORS_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def is_sharded_checkpoint(checkpoint: Path) -> bool:
    return (checkpoint / "training_state" / DCP_DIR / ".metadata").is_file()


def _state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optimizer": optimizer_state}


def save_sharded(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Every rank's shards of the model and optimiser into `folder` (a collective)."""
    import torch.distributed.checkpoint as dcp

    with _one_process_is_fine():
        dcp.save(_state(model, optimizer), checkpoint_id=str(folder))


def load_sharded(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The model and optimiser state of `folder`, resharded to this run (any topology)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    _check_shapes(folder, model)
    state = _state(model, optimizer)
    _drop_states_never_saved(folder, state["optimizer"])
    try:
        with _one_process_is_fine():
            dcp.load(state, checkpoint_id=str(folder))
    except Exception as err:  # DCP wraps every rank's failure in one CheckpointException
        raise CheckpointMismatch(
            f"the sharded training state does not fit this run: {str(err)[:500]}",
            where=str(folder),
            hint="resume with the policy config and optimiser the run was saved with (the "
            "checkpoint's pretrained_model/config.json unchanged), or start a new run "
            "fine-tuning its pretrained_model (--policy.pretrained_path)",
        ) from err
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optimizer"],
        # Not strict for the parameters left stateless above; the model's keys were checked.
        options=StateDictOptions(strict=False),
    )


def _drop_states_never_saved(folder: Path, optimizer_state: dict[str, Any]) -> None:
    """A parameter that never had a gradient (π0's last PaliGemma layer feeds nothing) has no
    optimiser state in the checkpoint, while a fresh optimiser's state dict gives every
    parameter one: those are left out of the load, so the parameter resumes stateless, as it
    was saved, instead of the load failing on keys that were never written."""
    import torch.distributed.checkpoint as dcp

    saved = set(dcp.FileSystemReader(str(folder)).read_metadata().state_dict_metadata)
    states = optimizer_state.get("state", {})
    for name in [
        name
        for name, entries in states.items()
        if not any(f"optimizer.state.{name}.{entry}" in saved for entry in entries)
    ]:
        del states[name]


@contextmanager
def _one_process_is_fine() -> Iterator[None]:
    """Without a process group DCP reads and writes as one process, which it warns about."""
    with warnings.catch_warnings():
        if not dist.is_initialized():
            warnings.filterwarnings("ignore", message=".*single process", category=UserWarning)
        yield


def _check_shapes(folder: Path, model: nn.Module) -> None:
    """Name what differs between the saved model and this one before DCP reads a byte."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = dcp.FileSystemReader(str(folder)).read_metadata().state_dict_metadata
    saved = {
        key.removeprefix("model."): tuple(meta.size)
        for key, meta in metadata.items()
        if key.startswith("model.") and isinstance(meta, TensorStorageMetadata)
    }
    live = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    mismatched = [
        f"{k} (model {list(live[k])}, checkpoint {list(saved[k])})"
        for k in live
        if k in saved and live[k] != saved[k]
    ]
    missing = [k for k in live if k not in saved]
    unexpected = [k for k in saved if k not in live]
    problems = [
        f"{label}: {', '.join(keys[:3])}{' …' if len(keys) > 3 else ''}"
        for label, keys in (
            ("shape mismatches", mismatched),
            ("missing from the checkpoint", missing),
            ("not in the model", unexpected),
        )
        if keys
    ]
    if problems:
        raise CheckpointMismatch(
            "the sharded checkpoint was written by a different model: " + "; ".join(problems),
            where=str(folder),
            hint="resume with the policy config the run was saved with (the checkpoint's "
            "pretrained_model/config.json unchanged), or start a new run fine-tuning its "
            "pretrained_model (--policy.pretrained_path)",
        )


# --- pretrained_model/model.safetensors, shard by shard ----------------------------------------


def _layout(tensors: Iterable[tuple[str, torch.Tensor]]) -> tuple[bytes, dict[str, int]]:
    """The safetensors header for these (global) shapes, and each tensor's data offset."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offsets: dict[str, int] = {}
    position = 0
    for name, tensor in tensors:
        size = tensor.numel() * tensor.element_size()
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [position, position + size],
        }
        offsets[name] = position
        position += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw, offsets


def _rows_of_this_rank(tensor: Any) -> tuple[int, torch.Tensor] | None:
    """(first row, rows) this rank writes of a sharded tensor, None when another rank does;
    a placement other than FSDP's (Shard(0), replicated across hsdp's groups) is gathered."""
    from torch.distributed.tensor import Replicate, Shard

    mesh, placements = tensor.device_mesh, tensor.placements
    shard_dims = [i for i, p in enumerate(placements) if isinstance(p, Shard)]
    simple = len(shard_dims) == 1 and placements[shard_dims[0]] == Shard(0)
    simple = simple and all(
        isinstance(p, Replicate) for i, p in enumerate(placements) if i != shard_dims[0]
    )
    if not simple:
        whole = tensor.full_tensor()
        return (0, whole) if dist.get_rank() == 0 else None
    shard_dim = shard_dims[0]
    for i in range(mesh.ndim):
        if i != shard_dim and mesh.get_local_rank(i) != 0:
            return None  # a replica: the first replica group writes
    index, count = mesh.get_local_rank(shard_dim), mesh.size(shard_dim)
    rows = tensor.shape[0] if tensor.ndim else 1
    chunk = -(-rows // count)  # torch.chunk's split, which FSDP follows
    first = min(index * chunk, rows)
    return first, tensor.to_local()


def export_weights(path: Path, model: nn.Module, world: World) -> None:
    """`model`'s weights as one safetensors file, each rank writing its own rows (collective)."""
    from torch.distributed.tensor import DTensor

    state = untied_state(model)
    header, offsets = _layout(state.items())
    if world.is_main:
        with path.open("wb") as file:
            file.write(header)
            end = max(
                (offsets[n] + t.numel() * t.element_size() for n, t in state.items()), default=0
            )
            file.truncate(len(header) + end)
    world.barrier()
    descriptor = os.open(path, os.O_WRONLY)
    try:
        for name, tensor in state.items():
            if isinstance(tensor, DTensor):
                mine = _rows_of_this_rank(tensor.detach())
            else:
                mine = (0, tensor) if world.is_main else None
            if mine is None:
                continue
            first, rows = mine
            data = rows.detach().to("cpu").contiguous()
            if not data.numel():
                continue
            row_bytes = (data.numel() // max(1, data.shape[0]) if data.ndim else 1) * (
                data.element_size()
            )
            start = len(header) + offsets[name] + first * row_bytes
            os.pwrite(descriptor, data.reshape(-1).view(torch.uint8).numpy().tobytes(), start)
    finally:
        os.close(descriptor)
    world.barrier()


def load_full_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """An unsharded run's optimiser files (`state_files`, keyed by parameter index) into this
    sharded optimiser: each rank keeps its rows of every tensor."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    names = {id(p): n for n, p in model.named_parameters()}
    order = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    state: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in state_files.read_tensors(folder / state_files.OPTIMIZER_STATE).items():
        _, index, name = key.split("/", 2)
        if int(index) >= len(order):
            raise CheckpointMismatch(
                f"the optimiser state names parameter {index}; this model has {len(order)}",
                where=str(folder / state_files.OPTIMIZER_STATE),
                hint="resume with the same policy type and optimiser as the run that saved it",
            )
        state.setdefault(order[int(index)], {})[name] = value
    groups = state_files.read_state_json(folder / state_files.OPTIMIZER_PARAM_GROUPS)
    if len(groups) != len(optimizer.param_groups):
        raise CheckpointMismatch(
            f"the optimiser has {len(optimizer.param_groups)} parameter groups, the checkpoint "
            f"{len(groups)}",
            where=str(folder / state_files.OPTIMIZER_PARAM_GROUPS),
            hint="resume with the same policy type and optimiser as the run that saved it",
        )
    first = 0
    for saved, live in zip(groups, optimizer.param_groups):
        count = len(live["params"])
        for key, value in live.items():
            if isinstance(value, tuple) and isinstance(saved.get(key), list):
                saved[key] = tuple(saved[key])
            if key in state_files.IMPLEMENTATION_FLAGS:
                saved[key] = value
        saved["params"] = order[first : first + count]
        first += count
    set_optimizer_state_dict(
        model,
        optimizer,
        {"state": state, "param_groups": groups},  # type: ignore[dict-item]
        options=StateDictOptions(full_state_dict=True),
    )
