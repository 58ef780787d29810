"""What a VLA reads from a normalised batch: its cameras, the task's tokens and the state.

Each camera the policy knows is resized with padding to the size its vision encoder takes and
scaled to [-1, 1] (SigLIP's range); a camera the batch lacks becomes a black image masked out
(up to `empty_cameras` placeholders). The task arrives tokenised by the pre-processor
(`observation.language.*`, see `tokenizer`); the state is the last step's, zero-padded to
`max_state_dim`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from rlctl.domain.errors import ConfigError

OBS_STATE = "observation.state"
ACTION = "action"
EMPTY_CAMERA_PREFIX = "observation.images.empty_camera_"


class VLAInputs(NamedTuple):
    """One batch as a VLA's model reads it."""

    images: list[Tensor]  # each (B, 3, H, W) in [-1, 1]
    image_masks: list[Tensor]  # each (B,): the camera is real in that row
    tokens: Tensor  # (B, L) the task's token ids
    token_masks: Tensor  # (B, L): a token, not padding
    state: Tensor | None  # (B, max_state_dim); None when the prompt holds it (π0.5)


def pad_vector(vector: Tensor, new_dim: int) -> Tensor:
    """Zero-pad the last dimension to `new_dim` (longer vectors are left as they are)."""
    if vector.shape[-1] >= new_dim:
        return vector
    return F.pad(vector, (0, new_dim - vector.shape[-1]))


def fit_vector(vector: Tensor, new_dim: int) -> Tensor:
    """The last dimension zero-padded or cut to exactly `new_dim` (X-VLA's)."""
    current = vector.shape[-1]
    if current == new_dim:
        return vector
    if current > new_dim:
        return vector[..., :new_dim]
    return F.pad(vector, (0, new_dim - current))


def last_step(value: Tensor, step_dims: int) -> Tensor:
    """The last time step of a tensor that has a time axis (more than `step_dims` dimensions)."""
    return value[:, -1] if value.ndim > step_dims else value


def robot_state(batch: Any, max_state_dim: int) -> Tensor:
    return pad_vector(last_step(batch[OBS_STATE], 2), max_state_dim)


def camera_keys(image_features: Any, empty_cameras: int) -> list[str]:
    """The cameras the model reads: the configured ones, then `empty_cameras` placeholders."""
    keys = list(image_features)
    empty = (f"{EMPTY_CAMERA_PREFIX}{i}" for i in range(empty_cameras))
    return keys + [key for key in empty if key not in keys]


def present_cameras(batch: Any, keys: list[str], policy: str) -> list[str]:
    """The cameras of `keys` the batch has (LeRobot's order: these first, placeholders after)."""
    present = [key for key in keys if key in batch]
    if not present:
        raise ConfigError(
            f"the batch has none of {policy}'s cameras ({', '.join(keys)})",
            where="observation.images",
            hint=f"{policy} reads at least one camera; check the dataset's or env's camera names",
        )
    return present


def add_placeholders(
    images: list[Tensor], masks: list[Tensor], count: int
) -> tuple[list[Tensor], list[Tensor]]:
    """`count` black images ([-1] everywhere) masked out in every row, after the real ones."""
    for _ in range(count):
        images.append(torch.ones_like(images[-1]) * -1)
        masks.append(torch.zeros_like(masks[-1]))
    return images, masks


def resize_with_pad(images: Tensor, height: int, width: int, *, centred: bool) -> Tensor:
    """(B, C, H, W) resized to fit (height, width), keeping the aspect ratio, and padded with
    black: on the top and left (LeRobot's SmolVLA), or on both sides (`centred`, openpi's, which
    also clamps the resized image to [0, 1])."""
    current_height, current_width = images.shape[2:]
    if (current_height, current_width) == (height, width):
        return images
    ratio = max(current_width / width, current_height / height)
    resized_height, resized_width = int(current_height / ratio), int(current_width / ratio)
    resized = F.interpolate(
        images, size=(resized_height, resized_width), mode="bilinear", align_corners=False
    )
    pad_height, pad_width = max(0, height - resized_height), max(0, width - resized_width)
    if not centred:
        return F.pad(resized, (pad_width, 0, pad_height, 0), value=0.0)
    top, left = pad_height // 2, pad_width // 2
    padding = (left, pad_width - left, top, pad_height - top)
    return F.pad(resized.clamp(0.0, 1.0), padding, value=0.0)


def openpi_camera(
    batch: Any, key: str, resolution: tuple[int, int], device: torch.device
) -> tuple[Tensor, Tensor]:
    """A camera as π0's family reads it: resized with padding (centred, openpi's) to
    `resolution`, in [-1, 1], present in every row."""
    image = last_step(batch[key], 4).to(device=device, dtype=torch.float32)
    image = resize_with_pad(image, *resolution, centred=True)
    every_row = torch.ones(image.shape[0], dtype=torch.bool, device=image.device)
    return image * 2.0 - 1.0, every_row
