"""Rotary position embeddings (RoPE), in the two arithmetics the family's references use.

Both turn each pair (x[i], x[i + dim/2]) of a head by the angle position / 10000^(2i / dim); they
round differently, and each model keeps its reference's to the bit:

- `rope_tables` and `rotate`: openpi's `apply_rope`, as LeRobot's SmolVLA writes it. The angles
  are positions divided by float32 timescales, the rotation runs in float32, on (B, L, heads,
  dim) tensors.
- `gemma_rope_tables` and `gemma_rotate`: transformers' Gemma, as π0 runs it. The angles are
  positions times inverse frequencies, the tables take the model's dtype (bfloat16 stays
  bfloat16), on (B, heads, L, dim) tensors.

The tables depend on the positions only, so a chunk computes them once for all the layers and
Euler steps that share them.
"""

from __future__ import annotations

import torch
from torch import Tensor

MAX_WAVELENGTH = 10_000.0
# (cos, sin)
Rotary = tuple[Tensor, Tensor]


def rope_tables(positions: Tensor, head_dim: int) -> Rotary:
    """openpi's (cos, sin) at positions (B, L), each (B, L, 1, head_dim / 2), float32."""
    d_half = head_dim // 2
    freq_exponents = (2.0 / head_dim) * torch.arange(
        d_half, dtype=torch.float32, device=positions.device
    )
    timescale = MAX_WAVELENGTH**freq_exponents
    radians = positions[..., None].to(torch.float32) / timescale[None, None, :]
    radians = radians[..., None, :]
    return torch.cos(radians), torch.sin(radians)


def rotate(x: Tensor, rotary: Rotary) -> Tensor:
    """x (B, L, heads, dim) rotated by `rope_tables`' angles, in float32, back in x's dtype."""
    cos, sin = rotary
    dtype = x.dtype
    x1, x2 = x.to(torch.float32).split(x.shape[-1] // 2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(dtype)


def apply_rope(x: Tensor, positions: Tensor) -> Tensor:
    """openpi's `apply_rope(x, positions)`: the tables made for this one use."""
    return rotate(x, rope_tables(positions, x.shape[-1]))


def gemma_rope_tables(
    positions: Tensor, head_dim: int, dtype: torch.dtype, base: float = MAX_WAVELENGTH
) -> Rotary:
    """Gemma's (cos, sin) at positions (B, L), each (B, 1, L, head_dim), in `dtype`; `base` is
    the longest wavelength (the multi-task DiT's `rope_base`)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float()
    inv_freq = 1.0 / (base ** (exponents / head_dim))
    freqs = positions[..., None].float() * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos().to(dtype)[:, None], angles.sin().to(dtype)[:, None]


def gemma_rotate(x: Tensor, rotary: Rotary) -> Tensor:
    """x (B, heads, L, dim) rotated by `gemma_rope_tables`' angles, in x's dtype."""
    cos, sin = rotary
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
