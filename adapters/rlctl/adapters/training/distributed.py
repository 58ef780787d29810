"""One process or several: what `torchrun` / `accelerate launch` set up, and the few collectives
training needs.

A launcher sets WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; with WORLD_SIZE > 1
the process group starts (NCCL on CUDA, gloo on CPU) and each process takes GPU LOCAL_RANK.
Objects travel between ranks as JSON bytes in a tensor — never pickled.
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import torch
import torch.distributed as dist

from rlctl.domain.errors import HardwareError


@attrs.frozen
class World:
    rank: int = 0
    local_rank: int = 0
    size: int = 1
    device: torch.device = attrs.field(factory=lambda: torch.device("cpu"))

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

    def gather_to_main(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's `tensor` (same shape and dtype on all), in rank order; [] off rank 0."""
        if not self.distributed:
            return [tensor]
        local = tensor.to(self.device)
        parts = [torch.empty_like(local) for _ in range(self.size)]
        dist.all_gather(parts, local)
        return [p.cpu() for p in parts] if self.is_main else []

    def close(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()


def _launched_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def start_world(requested_device: str | None) -> World:
    """The world this process belongs to, and the device it trains on."""
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
    if _launched_size() <= 1:
        return World(device=_single_device(requested_device, device_type))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device(device_type)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    return World(rank, local_rank, dist.get_world_size(), device)


def _single_device(requested: str | None, device_type: str) -> torch.device:
    if requested and ":" in requested:
        return torch.device(requested)
    return torch.device(device_type)
