"""Who attends to whom in a VLA's sequence, and at which positions.

The sequence is [prefix, suffix]: the prefix is the observation (images, task tokens; SmolVLA's
state), the suffix the action expert's tokens (noisy actions; π0's state). Tokens come in
*blocks* (openpi's convention): `blocks` (B, N) is 1 where a new block starts, and a token sees
every real token (`pads`, B x N booleans) of its own block and of the earlier ones. So the prefix,
one block, never sees the suffix, and at inference it runs once while the suffix attends to its
cached keys and values. Positions count real tokens only.
"""

from __future__ import annotations

import torch
from torch import Tensor

# What LeRobot's SmolVLA puts in place of a hidden key's score; π0 uses openpi's value.
FLOAT32_LOWEST = torch.finfo(torch.float32).min


def attention_masks_2d(pads: Tensor, blocks: Tensor) -> Tensor:
    """(B, N, N) booleans: token i sees token j when j is real and its block starts no later.

    `blocks` 0 0 0 1 1 is prefix-LM attention: the first three tokens see each other, the last
    two are causal."""
    cumsum = torch.cumsum(blocks, dim=1)
    allowed = cumsum[:, None, :] <= cumsum[:, :, None]
    return allowed & (pads[:, None, :] * pads[:, :, None])


def additive_mask(allowed: Tensor, hidden: float = FLOAT32_LOWEST) -> Tensor:
    """(B, Lq, Lk) booleans -> the (B, 1, Lq, Lk) float32 mask added to attention scores: 0 where
    allowed, `hidden` elsewhere (any value that low gives the same probabilities; each model
    keeps its reference's)."""
    return torch.where(allowed[:, None], 0.0, hidden)


def positions(pads: Tensor) -> Tensor:
    """Each token's position (B, N): the number of real tokens before it."""
    return torch.cumsum(pads, dim=1) - 1


def block_masks(
    starts: list[bool], batch: int, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor]:
    """The padding (none) and block starts, (batch, len(starts)) each, of tokens all real."""
    pads = torch.ones(batch, len(starts), dtype=torch.bool, device=device)
    blocks = torch.tensor(starts, dtype=dtype, device=device)
    return pads, blocks[None, :].expand(batch, -1)


def joint_layout(
    prefix_pad: Tensor, prefix_blocks: Tensor, suffix_pad: Tensor, suffix_blocks: Tensor
) -> tuple[Tensor, Tensor]:
    """Training: what each token of [prefix, suffix] sees (B, N, N) and its position (B, N)."""
    pads = torch.cat([prefix_pad, suffix_pad], dim=1)
    blocks = torch.cat([prefix_blocks.to(suffix_blocks.dtype), suffix_blocks], dim=1)
    return attention_masks_2d(pads, blocks), positions(pads)


def suffix_layout(
    prefix_pad: Tensor, suffix_pad: Tensor, suffix_blocks: Tensor
) -> tuple[Tensor, Tensor]:
    """Inference: what the suffix sees over [cached prefix, suffix] (B, Ls, Lp + Ls) — every real
    prefix token, and itself block by block — and its positions after the prefix's (B, Ls). The
    same at every Euler step of a chunk: it depends on the padding only."""
    batch, suffix_len = suffix_pad.shape
    sees_prefix = prefix_pad[:, None, :].expand(batch, suffix_len, prefix_pad.shape[1])
    allowed = torch.cat([sees_prefix, attention_masks_2d(suffix_pad, suffix_blocks)], dim=2)
    after_prefix = prefix_pad.sum(dim=-1)[:, None] + torch.cumsum(suffix_pad, dim=1) - 1
    return allowed, after_prefix


# --- what no token attends to (inference's speed paths) ----------------------------------------


def seen_only(pads: Tensor, *tensors: Tensor) -> tuple[Tensor, ...]:
    """`tensors` (B, N, ...) without the columns that are padding in every row of `pads` (B, N).

    No query attends to them and positions count only real tokens, so what comes out is the
    same; what goes is their cost (a padded prompt, `prefix_length`'s padding)."""
    seen = pads.any(dim=0)
    if bool(seen.all()):
        return tensors
    return tuple(tensor[:, seen] for tensor in tensors)


def drop_unseen_images(
    images: list[Tensor], image_masks: list[Tensor]
) -> tuple[list[Tensor], list[Tensor]]:
    """The images without those masked out in every row (`empty_cameras` placeholders, absent
    cameras): no token attends to their patches, so the vision encoder need not make them."""
    kept = [(image, mask) for image, mask in zip(images, image_masks, strict=True) if mask.any()]
    if not kept:
        return images, image_masks
    return [image for image, _ in kept], [mask for _, mask in kept]
