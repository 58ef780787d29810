"""`vla.loading.into_process_memory`: parameters mapped from a safetensors file are copied into
the process's memory, their mapped pages dropped, and nothing else is touched; `map_in`: their
pages mapped in at once."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from rlctl.adapters.policies.vla.loading import _file_mappings, into_process_memory, map_in

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/maps"
)


def mapped(tensor: torch.Tensor) -> bool:
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    return any(low <= start and end <= high for low, high in _file_mappings())


def test_mapped_parameters_move_and_every_reader_keeps_its_values(tmp_path: Path) -> None:
    torch.manual_seed(0)
    values = {"a": torch.randn(300, 700), "b": torch.randn(5, 3)}
    save_file(values, str(tmp_path / "w.safetensors"))
    state = load_file(str(tmp_path / "w.safetensors"))
    assert mapped(state["a"])
    module = nn.Module()
    module.a = nn.Parameter(state["a"], requires_grad=False)
    module.b = nn.Parameter(state["b"])
    module.c = nn.Parameter(torch.randn(4))  # the process's own memory already
    own = module.c.data_ptr()
    moved = into_process_memory(module)
    assert moved == (300 * 700 + 5 * 3) * 4
    assert not mapped(module.a) and not mapped(module.b)
    assert module.c.data_ptr() == own
    assert not module.a.requires_grad and module.b.requires_grad
    torch.testing.assert_close(module.a.data, values["a"], rtol=0, atol=0)
    torch.testing.assert_close(module.b.data, values["b"], rtol=0, atol=0)
    # The file's range was released, not lost: a tensor still over it reads the file again.
    torch.testing.assert_close(state["a"], values["a"], rtol=0, atol=0)
    assert into_process_memory(module) == 0


def resident_kb(address: int) -> int:
    """The resident kilobytes of the mapping holding `address` (/proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            low, _, high = head.partition("-")
            inside = int(low, 16) <= address < int(high, 16)
        elif inside and head == "Rss:":
            return int(line.split()[1])
    raise AssertionError("no mapping holds the address")


def test_map_in_maps_a_parameters_pages_at_once(tmp_path: Path) -> None:
    release = tuple(int(part) for part in platform.release().split(".")[:2] if part.isdigit())
    values = {"a": torch.randn(512, 1024)}  # 2 MiB
    save_file(values, str(tmp_path / "w.safetensors"))
    state = load_file(str(tmp_path / "w.safetensors"))
    module = nn.Module()
    module.a = nn.Parameter(state["a"])
    before = resident_kb(module.a.data_ptr())
    asked = map_in(module)
    if release < (5, 14):  # no MADV_POPULATE_READ: the pages come as they are touched
        assert asked == 0
        return
    assert asked == 512 * 1024 * 4
    assert before < 1024 <= 2048 <= resident_kb(module.a.data_ptr())  # mapped in, not read
    assert mapped(module.a)  # still the file's pages, unchanged
    torch.testing.assert_close(module.a.data, values["a"], rtol=0, atol=0)
