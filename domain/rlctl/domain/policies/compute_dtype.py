"""`compute_dtype`: which dtype a policy stored in bfloat16 computes in on the device at hand.

A checkpoint in bfloat16 (SmolVLA on a pretrained VLM, π0 / π0.5 / X-VLA with `dtype=bfloat16`,
GR00T's bfloat16 autocast) is fast where the processor multiplies bfloat16 natively (CUDA since
Ampere; CPUs with AMX or AVX512_BF16, ARM's BF16). Elsewhere bfloat16 is emulated: on an AVX2
CPU a SigLIP-width matrix product runs tens of times slower than in float32
(`benchmarks/cpu_dtypes.py`). The setting:

- `auto` (default): compute in float32 (weights upcast once at load, activations in float32)
  only where the device emulates bfloat16; keep bfloat16 where it is native.
- `keep`: compute in the checkpoint's dtypes everywhere (LeRobot's arithmetic, half the memory).
- `float32`: compute in float32 on every device.

Saved checkpoints keep the dtypes they were loaded or built with, whatever the setting: the
files stay the ones LeRobot reads and writes.
"""

from __future__ import annotations

from typing import Literal

ComputeDtype = Literal["auto", "keep", "float32"]
COMPUTE_DTYPES: tuple[ComputeDtype, ...] = ("auto", "keep", "float32")
