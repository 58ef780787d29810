"""What every rlctl process sets before torch loads: run as the entrypoints layer is imported
(`rlctl.entrypoints`), which the CLI, `python -m rlctl` and `rlctl.api` all come through."""

from __future__ import annotations

import os


def prepare_process_environment() -> None:
    """Settings read once, as torch's libraries load; a user's own value is kept."""
    # torch's x86 wheels link Intel MKL, whose fast memory manager keeps buffers per thread and
    # frees them as the thread ends. A thread that used MKL (a weight-packing thread, a policy
    # server's worker) ending while another thread allocated in MKL left both spinning for good
    # at 100 % CPU (seen on a Xeon with torch 2.15, in a Diffusion policy's first convolution).
    # Without it MKL allocates with malloc: no difference measured in GEMMs or convolutions.
    os.environ.setdefault("MKL_DISABLE_FAST_MM", "1")
