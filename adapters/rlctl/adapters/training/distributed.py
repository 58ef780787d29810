"""One process or several: what `torchrun` / `accelerate launch` / `srun` set up, and the few
collectives training needs.

A launcher sets WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; with WORLD_SIZE > 1
the process group starts (NCCL on CUDA, gloo on CPU) and each process takes GPU LOCAL_RANK.
Under SLURM (`srun`, one task per GPU) the same numbers come from SLURM_NTASKS, SLURM_PROCID and
SLURM_LOCALID once MASTER_ADDR is exported (the job's first node), so no launcher is needed.
The sharded strategies (fsdp, hsdp) also build the device mesh the model is sharded over.
Objects travel between ranks as JSON bytes in a tensor — never pickled.
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import torch
import torch.distributed as dist

from rlctl.domain.errors import ConfigError, HardwareError
from rlctl.domain.train_settings import DistributedSettings


@attrs.frozen
class World:
    rank: int = 0
    local_rank: int = 0
    size: int = 1
    device: torch.device = attrs.field(factory=lambda: torch.device("cpu"))
    # The mesh a sharded strategy shards over: 1-D ("shard",) for fsdp, 2-D ("replicate",
    # "shard") for hsdp; None under ddp or a single process.
    mesh: Any = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def broadcast_json(self, value: Any) -> Any:
        """Rank 0's `value`, on every rank."""
        if not self.distributed:
            return value
        payload = json.dumps(value).encode() if self.is_main else b""
        size = torch.tensor([len(payload)], dtype=torch.int64, device=self.device)
        dist.broadcast(size, src=0)
        data = torch.zeros(int(size.item()), dtype=torch.uint8, device=self.device)
        if self.is_main:
            data.copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
        dist.broadcast(data, src=0)
        return json.loads(data.cpu().numpy().tobytes().decode())

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """The mean of `value` (a scalar) over the ranks, on every rank."""
        if not self.distributed:
            return value
        total = value.detach().float().reshape(1).clone()
        dist.all_reduce(total)
        return (total / self.size).reshape(value.shape).to(value.device)

    def any(self, flag: bool) -> bool:
        """True on every rank when `flag` is true on any."""
        if not self.distributed:
            return flag
        value = torch.tensor([1 if flag else 0], dtype=torch.int64, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def gather_to_main(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's `tensor` (same shape and dtype on all), in rank order; [] off rank 0."""
        if not self.distributed:
            return [tensor]
        local = tensor.to(self.device)
        parts = [torch.empty_like(local) for _ in range(self.size)]
        dist.all_gather(parts, local)
        return [p.cpu() for p in parts] if self.is_main else []

    def close(self) -> None:
        if (self.distributed or self.mesh is not None) and dist.is_initialized():
            dist.destroy_process_group()


def _launch_environment() -> dict[str, str]:
    """torchrun's variables; under `srun` without torchrun, SLURM's in their place."""
    env = os.environ
    if "WORLD_SIZE" in env or "SLURM_PROCID" not in env or "MASTER_ADDR" not in env:
        return dict(env)
    return {
        **env,
        "WORLD_SIZE": env.get("SLURM_NTASKS", "1"),
        "RANK": env["SLURM_PROCID"],
        "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
        "LOCAL_WORLD_SIZE": env.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
        or env.get("SLURM_NTASKS", "1"),
        "MASTER_PORT": env.get("MASTER_PORT", "29500"),
    }


def _launched_size() -> int:
    return int(_launch_environment().get("WORLD_SIZE", "1"))


def start_world(requested_device: str | None, settings: DistributedSettings | None = None) -> World:
    """The world this process belongs to, and the device it trains on."""
    settings = settings or DistributedSettings()
    env = _launch_environment()
    device_type = requested_device or ("cuda" if torch.cuda.is_available() else "cpu")
    device_type = torch.device(device_type).type
    if device_type == "cuda" and not torch.cuda.is_available():
        raise HardwareError(
            "CUDA is not available on this machine",
            where="policy.device",
            hint="train on the CPU with --policy.device=cpu",
        )
    if device_type == "cuda":
        # As lerobot-train: let cuDNN pick its fastest kernels, and TF32 for float32 matmuls.
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
    launched = "WORLD_SIZE" in env
    if settings.sharded and not launched:
        raise ConfigError(
            f"--distributed.strategy={settings.strategy} shards the model over several "
            "processes, but this one was not started by a launcher (no WORLD_SIZE, RANK, "
            "MASTER_ADDR in the environment)",
            where="distributed.strategy",
            hint="start it with `torchrun --nproc-per-node=N -m rlctl train ...` (or under "
            "SLURM: export MASTER_ADDR, then `srun rlctl train ...`), or drop "
            "--distributed.strategy to train in this one process",
        )
    if int(env.get("WORLD_SIZE", "1")) <= 1 and not settings.sharded:
        return World(device=_single_device(requested_device, device_type))
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if key in env:
            os.environ[key] = env[key]
    rank = int(env.get("RANK", "0"))
    local_rank = int(env.get("LOCAL_RANK", "0"))
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device(device_type)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    size = dist.get_world_size()
    try:
        mesh = _mesh(settings, size, env, device_type) if settings.sharded else None
    except BaseException:
        dist.destroy_process_group()
        raise
    return World(rank, local_rank, size, device, mesh)


def _mesh(settings: DistributedSettings, size: int, env: dict[str, str], device_type: str) -> Any:
    from torch.distributed.device_mesh import init_device_mesh

    if settings.strategy == "fsdp":
        return init_device_mesh(device_type, (size,), mesh_dim_names=("shard",))
    shard = settings.shard_size or int(env.get("LOCAL_WORLD_SIZE", str(size)))
    if shard > size or size % shard:
        raise ConfigError(
            f"hsdp shards inside groups of {shard} processes, which {size} processes cannot "
            "be divided into",
            where="distributed.shard_size",
            hint=f"pick a --distributed.shard_size that divides {size} (the processes of one "
            "node, usually), or launch a multiple of it",
        )
    return init_device_mesh(
        device_type, (size // shard, shard), mesh_dim_names=("replicate", "shard")
    )


def _single_device(requested: str | None, device_type: str) -> torch.device:
    if requested and ":" in requested:
        return torch.device(requested)
    return torch.device(device_type)
