"""Training on the CPU keeps freed memory: a repeated large allocation stops faulting pages in."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import resource, sys
import numpy as np
from rlctl.adapters.training.allocator import keep_freed_memory

if sys.argv[1] == "keep":
    assert keep_freed_memory() and keep_freed_memory()  # idempotent

def step():
    # A 48 MiB activation, written in full, then freed: a training step's pattern.
    a = np.empty(12 << 20, dtype=np.float32)
    a.fill(1.0)
    del a

step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[-1])


def test_freed_memory_is_reused_instead_of_faulted_in_again() -> None:
    assert sys.platform.startswith("linux")
    default, kept = _faults("default"), _faults("keep")
    # 10 x 48 MiB is 120k pages of 4 KiB (fewer with huge pages); kept memory needs none.
    assert kept < 200
    assert default > 10 * kept + 100
