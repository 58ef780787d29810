"""Crop and resize of a camera's frames, as LeRobot's `crop_dataset_roi` does it: the frame as
floats in [0, 1] (C, H, W), torchvision's crop then resize (bilinear, antialiased), clamped to
[0, 1], and stored as LeRobot stores a float image (times 255, truncated to uint8)."""

from __future__ import annotations

import numpy as np

from rlctl.domain.rl.roi import RegionCrop


def crop_resize(frame: np.ndarray, crop: RegionCrop) -> np.ndarray:
    """An (H, W, C) uint8 frame cropped to `crop`'s rectangle and resized to its size."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    region = frame[crop.top : crop.top + crop.height, crop.left : crop.left + crop.width]
    image = torch.from_numpy(np.ascontiguousarray(region)).permute(2, 0, 1).float() / 255.0
    resized = F.interpolate(
        image[None], size=crop.size, mode="bilinear", align_corners=False, antialias=True
    )[0].clamp(0, 1)
    return (resized.permute(1, 2, 0).numpy() * 255).astype(np.uint8)
