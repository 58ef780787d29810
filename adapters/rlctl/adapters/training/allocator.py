"""Keep freed memory in the process while training on the CPU (glibc's allocator).

glibc hands allocations above a threshold (at most 32 MiB) straight to the kernel with `mmap`
and returns them on `free`. A training step allocates and frees the same large activations and
gradients every time (a ResNet stem's gradient alone is 39 MiB at 240x320, batch 8), so each
step paid for them again in page faults: tens of thousands per step, 0.1-0.3 s of system time in
the first hundred steps, and still thousands later. With `mmap` off for allocations and the heap
never trimmed, a step reuses the previous step's memory: a few hundred faults per step. The
memory a run holds is what its largest step needs, which a training run holds anyway.

No effect (and no error) where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import structlog

log = structlog.get_logger(__name__)

# mallopt(3) parameters.
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4
# mallopt takes an int: the largest trim threshold it can be given, 2 GiB, is "never" here.
_NEVER_TRIM = 2**31 - 1
_TOP_PAD = 64 << 20

_done = False


def keep_freed_memory() -> bool:
    """Make large allocations come from (and return to) the heap; True when it took effect."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt)
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    settings = ((_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, _NEVER_TRIM), (_M_TOP_PAD, _TOP_PAD))
    ok = all(mallopt(param, value) == 1 for param, value in settings)
    if ok:
        _done = True
    else:
        log.debug("mallopt refused a setting; the allocator keeps its defaults")
    return ok
