"""Building a VLA and loading a checkpoint into it without making weights twice.

A model about to receive a checkpoint's weights is built on PyTorch's meta device: its modules
have shapes and dtypes but no memory and no random initialisation (at real size that is seconds
and gigabytes saved). Loading then *assigns* the file's tensors as the parameters (the
checkpoint reader's safetensors are memory-mapped, so a tensor is read from disk when first
touched), casts each to the dtype the model was built with, and rebuilds the few buffers that no
checkpoint holds. The backbones come from `transformers` (the `smolvla` extra).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlctl.domain.errors import ConfigError

INSTALL_HINT = (
    "install the smolvla extra: uv sync --extra smolvla (or pip install 'rlctl[smolvla]')"
)


def require_transformers(what: str) -> Any:
    """The `transformers` module, or a ConfigError saying what to install."""
    try:
        import transformers
    except ImportError as err:
        raise ConfigError(f"{what} needs the transformers library", hint=INSTALL_HINT) from err
    return transformers


def building(load_backbone_weights: bool) -> AbstractContextManager[Any]:
    """Where to build a model: as usual, or on the meta device when a checkpoint's weights
    follow (`load_backbone_weights` False)."""
    return nullcontext() if load_backbone_weights else torch.device("meta")


def is_on_meta(module: nn.Module) -> bool:
    return any(p.is_meta for p in module.parameters())


def built_dtypes(module: nn.Module) -> dict[str, torch.dtype]:
    return {name: t.dtype for name, t in module.state_dict().items()}


class AssignsOnMeta(nn.Module):
    """A model that may be built on the meta device (`building`): its `load_state_dict` then
    assigns the file's tensors and finishes the load (`finish_meta_load`), naming the model by
    its config's `type_name` in what it refuses. Listed before the model's other bases."""

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        on_meta = is_on_meta(self)
        dtypes = built_dtypes(self)
        result = super().load_state_dict(state_dict, strict=strict, assign=assign or on_meta)
        if on_meta:
            config = getattr(self, "config", None)
            finish_meta_load(self, dtypes, getattr(config, "type_name", type(self).__name__))
        return result


def finish_meta_load(module: nn.Module, dtypes: Mapping[str, torch.dtype], what: str) -> None:
    """After a state dict was assigned to `module` built on the meta device: refuse tensors the
    file left unset, give each parameter the dtype it was built with (`dtypes`, from
    `built_dtypes`), rebuild the buffers no checkpoint holds."""
    left = [name for name, t in module.state_dict().items() if t.is_meta]
    if left:
        raise ConfigError(
            f"the checkpoint left {len(left)} {what} tensors unset: {', '.join(left[:8])}",
            where="model.safetensors",
        )
    # Assigned tensors come in the file's dtype; each takes the one the model was built with
    # (a pretrained VLM runs in bfloat16, as LeRobot loads it). requires_grad is the module's
    # (assign keeps it), so frozen parts stay frozen.
    for name, param in module.named_parameters():
        if param.dtype != dtypes[name]:
            param.data = param.data.to(dtypes[name])
    materialize_buffers(module, what)


def materialize_buffers(module: nn.Module, what: str, *, non_persistent: bool = False) -> None:
    """The buffers that are no checkpoint's (SigLIP's patch positions, the embeddings' scale),
    computed again after the parameters were loaded onto a model built on the meta device
    (`non_persistent`: only those no state dict holds)."""
    for owner in module.modules():
        for name, buffer in list(owner.named_buffers(recurse=False)):
            if not buffer.is_meta:
                continue
            if non_persistent and name not in owner._non_persistent_buffers_set:
                continue
            if name == "position_ids":
                value = torch.arange(buffer.shape[-1]).expand(buffer.shape)
            elif name == "embed_scale":
                value = torch.tensor(float(getattr(owner, "scalar_embed_scale", 1.0)))
            else:
                value = _rebuilt_buffer(owner, name, what)
            setattr(owner, name, value.to(buffer.dtype))


def _rebuilt_buffer(owner: nn.Module, name: str, what: str) -> torch.Tensor:
    """A buffer a module computes from its config (rotary frequencies): the module is built
    again on the CPU from that config, and its buffer taken."""
    config = getattr(owner, "config", None)
    if config is not None:
        try:
            with torch.device("cpu"):
                fresh = type(owner)(config)
        except Exception:  # a module whose constructor takes more than its config
            fresh = None
        value = dict(fresh.named_buffers(recurse=False)).get(name) if fresh is not None else None
        if value is not None:
            return value
    raise ConfigError(f"{what}'s buffer {name!r} cannot be rebuilt after loading")


# --- weights read token after token --------------------------------------------------------------

MADV_DONTNEED = 4


def _file_mappings() -> list[tuple[int, int]]:
    """The address ranges of this process's memory-mapped files (Linux's /proc/self/maps;
    none elsewhere)."""
    try:
        with Path("/proc/self/maps").open(encoding="ascii", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    ranges = []
    for line in lines:
        fields = line.split(maxsplit=5)
        # address perms offset dev inode path: a file's mapping has an inode and a path.
        if len(fields) == 6 and fields[4] != "0" and fields[5].startswith("/"):
            start, _, end = fields[0].partition("-")
            ranges.append((int(start, 16), int(end, 16)))
    return ranges


MADV_POPULATE_READ = 22  # Linux 5.14


def _file_mapped(module: nn.Module) -> list[tuple[nn.Parameter, int, int]]:
    """The CPU parameters of `module` that lie in a memory-mapped file, with their byte
    ranges."""
    mapped = _file_mappings()
    found: list[tuple[nn.Parameter, int, int]] = []
    if not mapped:
        return found
    for param in module.parameters():
        if param.device.type != "cpu" or param.is_meta or not param.is_contiguous():
            continue
        start = param.data_ptr()
        length = param.numel() * param.element_size()
        if any(low <= start and start + length <= high for low, high in mapped):
            found.append((param, start, length))
    return found


def map_in(module: nn.Module) -> int:
    """Maps the pages of `module`'s file-mapped parameters into the process at once
    (`madvise(MADV_POPULATE_READ)`, Linux 5.14 and later; elsewhere nothing), rather than one
    page fault after another as a first forward touches them; returns the bytes asked for.
    The call runs outside Python's lock, so a background thread can do it while a load goes
    on."""
    import ctypes
    import mmap

    ranges = sorted((start, start + length) for _, start, length in _file_mapped(module))
    if not ranges:
        return 0
    page = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    asked = 0
    for start, end in ranges:
        first = start // page * page
        last = -(-end // page) * page
        if libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), MADV_POPULATE_READ):
            return asked  # an older kernel: the pages come as they are touched
        asked += end - start
    return asked


def _release(start: int, length: int) -> None:
    """Drops this process's pages of a file-mapped range (whole pages inside it): the file's
    pages stay in the page cache, and a later read of the range reads them again."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    first = -(-start // page) * page
    last = (start + length) // page * page
    if last <= first:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), MADV_DONTNEED)


def into_process_memory(module: nn.Module) -> int:
    """Copies the CPU parameters of `module` that still lie in the checkpoint's memory map into
    the process's own memory; returns how many bytes moved.

    Why: a checkpoint loads by mapping its safetensors file (no copy, read as first touched),
    which suits weights read a few times. Token-by-token decoding reads every weight of the
    language model once per token (gigabytes at real size), and reading them through the file's
    mapping measured 10-20 % slower on a CPU than from the process's memory (LeRobot's, which
    copies the weights at load): more page-table walks for the file's pages. Each copied
    parameter's mapped pages are dropped at once (`madvise`), so memory grows by one parameter
    at a time; other tensors over the same file range still read it (from the page cache)."""
    moved = 0
    for param, start, length in _file_mapped(module):
        source = param.data
        param.data = source.clone()
        del source
        _release(start, length)
        moved += length
    return moved
