"""The speed path for bfloat16 models on devices that only emulate bfloat16 (`compute_dtype`).

A VLA stored in bfloat16 computes in bfloat16 in LeRobot and, by default, here. Where the
processor has no bfloat16 arithmetic (a CPU without AMX, AVX512_BF16 or ARM's BF16; a CUDA GPU
before Ampere) each product is emulated: on an AVX2 CPU a SigLIP-width matrix product runs 45x
slower than in float32 and a SigLIP layer 7.6x (`benchmarks/cpu_dtypes.py`). There the model
computes in float32 instead: its bfloat16 weights are upcast once, after loading (activations
follow the weights), which gives the float32 model's outputs — the bfloat16 ones up to bfloat16
rounding — for twice the memory of those weights. Checkpoints are saved in the dtypes they were
loaded with (`PolicyModel.checkpoint_dtypes`), so the files stay LeRobot's.

`use_compute_dtype(model, setting, device)` applies the setting (`rlctl.domain.policies.
compute_dtype`: auto, keep, float32) and says once in the log what it did, why, and how to keep
bfloat16. `native_bfloat16(device)` is the one detection.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path

import structlog
import torch

from rlctl.adapters.policies.base import PolicyModel
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies.compute_dtype import COMPUTE_DTYPES

log = structlog.get_logger()

# x86 flags (/proc/cpuinfo, Linux's names) that multiply bfloat16 in hardware.
X86_BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPUINFO = Path("/proc/cpuinfo")
# Keep bfloat16 when the upcast would leave less than this share of the free memory.
MEMORY_MARGIN = 0.8

_reported: set[tuple[str, str, str]] = set()


def native_bfloat16(device: torch.device | str) -> bool:
    """Whether `device` multiplies bfloat16 in hardware (else torch emulates it, slowly).
    Devices other than CPUs and CUDA GPUs (MPS, XPU) count as native: left as they are."""
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    if device.type != "cpu":
        return True
    return cpu_bfloat16_native()


@functools.cache
def cpu_bfloat16_native() -> bool:
    """This CPU's answer, read once: oneDNN present and the CPU's bfloat16 instructions."""
    if not torch.backends.mkldnn.is_available():
        return False
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i386", "i686"):
        return bool(cpu_flags() & X86_BFLOAT16_FLAGS)
    if machine in ("arm64", "aarch64"):
        return "bf16" in cpu_flags()
    return False


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags in Linux's names (`amx_bf16`, `avx512_bf16`, ARM's `bf16`):
    from torch's cpuinfo where it answers, /proc/cpuinfo on Linux, sysctl on macOS."""
    flags: set[str] = set()
    cpu = torch.cpu
    if getattr(cpu, "_is_avx512_bf16_supported", lambda: False)():
        flags.add("avx512_bf16")
    if getattr(cpu, "_is_amx_tile_supported", lambda: False)():
        flags.add("amx_bf16")  # every CPU with AMX tiles has AMX-BF16
    if CPUINFO.is_file():
        for line in CPUINFO.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() in ("flags", "features"):
                flags.update(value.split())
                break
    elif platform.system() == "Darwin":
        flags.update(_darwin_flags())
    return frozenset(flags)


def _darwin_flags() -> set[str]:
    try:
        answer = subprocess.run(
            ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return set()
    return {"bf16"} if answer == "1" else set()


def use_compute_dtype(model: PolicyModel, setting: str | None, device: torch.device | str) -> bool:
    """Apply `setting` (None: auto) to `model`, whose weights are on `device`; True when it
    now computes in float32 where it computed in bfloat16. Said once in the log per policy
    type, device and decision."""
    setting = setting or "auto"
    if setting not in COMPUTE_DTYPES:
        raise ConfigError(
            f"unknown compute_dtype {setting!r}",
            where="policy.compute_dtype",
            hint=f"use one of {', '.join(COMPUTE_DTYPES)}",
        )
    device = torch.device(device)
    if setting == "keep" or not model.computes_in_bfloat16():
        return False
    what = model.config.type_name
    if setting == "auto":
        if native_bfloat16(device):
            return False
        extra = _upcast_bytes(model)
        free = _free_memory() if device.type == "cpu" else None
        if free is not None and extra > MEMORY_MARGIN * free:
            _say_once(
                (what, str(device), "memory"),
                "kept bfloat16 although this device emulates it (slow): computing in float32 "
                "would need more memory than is free",
                policy=what,
                device=str(device),
                needs_gb=round(extra / 1e9, 2),
                free_gb=round(free / 1e9, 2),
                hint="free memory, or --policy.compute_dtype=float32 to upcast anyway",
            )
            return False
        why = f"{device.type} has no native bfloat16 (bfloat16 products are emulated, slowly)"
    else:
        why = "asked for by --policy.compute_dtype=float32"
    model.compute_in_float32()
    _say_once(
        (what, str(device), "float32"),
        f"the {what} policy's bfloat16 weights were upcast: it computes in float32 "
        "(the bfloat16 outputs up to bfloat16 rounding; checkpoints are still saved in "
        "bfloat16)",
        policy=what,
        device=str(device),
        reason=why,
        hint="--policy.compute_dtype=keep computes in bfloat16 as LeRobot does",
    )
    return True


def _upcast_bytes(model: PolicyModel) -> int:
    """The memory an upcast takes: a float32 copy of each bfloat16 tensor (the bfloat16 one,
    often pages of the memory-mapped checkpoint, is let go after)."""
    seen: set[int] = set()
    total = 0
    for tensor in (*model.parameters(), *model.buffers()):
        if tensor.dtype == torch.bfloat16 and id(tensor) not in seen:
            seen.add(id(tensor))
            total += 4 * tensor.numel()
    return total


def _free_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux's MemAvailable); None: unknown."""
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _say_once(key: tuple[str, str, str], message: str, **fields: object) -> None:
    if key in _reported:
        return
    _reported.add(key)
    log.info(message, **fields)
