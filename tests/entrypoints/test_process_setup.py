"""Every rlctl process switches MKL's fast memory manager off before torch loads (see
`rlctl.entrypoints.process_setup`): checked in fresh processes, through MKL's own report."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

STATUS = """
import ctypes, sys
{setup}
import torch
lib = ctypes.CDLL(torch.__file__.replace("__init__.py", "lib/libtorch_cpu.so"))
if not hasattr(lib, "mkl_serv_get_fast_mm_status"):
    print("no-mkl")
    sys.exit(0)
torch.randn(64, 64) @ torch.randn(64, 64)
print(lib.mkl_serv_get_fast_mm_status())
"""


def fast_mm_status(setup: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "MKL_DISABLE_FAST_MM"}
    done = subprocess.run(
        [sys.executable, "-c", STATUS.format(setup=setup)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    status = done.stdout.strip().splitlines()[-1]
    if status == "no-mkl":
        pytest.skip("this torch has no Intel MKL")
    return status


@pytest.mark.parametrize(
    "setup", ["import rlctl.api", "import rlctl.entrypoints.cli.main"], ids=["api", "cli"]
)
def test_an_rlctl_process_runs_mkl_without_its_fast_memory_manager(setup):
    assert fast_mm_status("") == "0"  # torch alone keeps it on: the check can tell
    assert fast_mm_status(setup) == "1"
