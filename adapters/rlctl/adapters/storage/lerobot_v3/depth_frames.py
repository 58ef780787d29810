"""Depth cameras of a dataset as LeRobot 0.6.1's `__getitem__` returns them.

A depth video's frames are 12-bit codes; `dequantize` turns them into float32 `(T, 1, H, W)`
depth in the output unit with LeRobot's own torch operations, in its order, so the values are
LeRobot's to the bit (millimetres are rounded, as LeRobot rounds them). Depth image features hold
raw depth (uint16 mm or float32 m) and only change unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.depth import (
    METRE,
    MM_PER_METRE,
    DepthQuantization,
    check_unit,
    unit_factor,
)
from rlctl.domain.features import FeatureSpec

_UINT16_MAX = 65535.0


def dequantize(
    codes: np.ndarray, quantization: DepthQuantization, output_unit: str
) -> torch.Tensor:
    """Codes `(T, H, W)` as depth `(T, 1, H, W)`: LeRobot's `dequantize_depth`, torch path."""
    scale, offset = quantization.scale_offset()
    depth = torch.from_numpy(codes).to(dtype=torch.float32, copy=True)
    depth.mul_(scale).add_(offset)
    if quantization.use_log:
        depth.exp_().sub_(quantization.shift)
    depth.clamp_(quantization.depth_min, quantization.depth_max)
    depth.unsqueeze_(-3)
    if output_unit == METRE:
        return depth
    return depth.mul_(MM_PER_METRE).round_().clamp_(0.0, _UINT16_MAX)


def stored_unit(spec: FeatureSpec) -> str | None:
    """The unit a depth feature's frames were recorded in (`depth_unit`), None if unrecorded."""
    unit = (spec.info or {}).get("depth_unit")
    return None if unit is None else check_unit(str(unit), f"features.{spec.key}.info.depth_unit")


class DepthCameras:
    """The dataset's depth features: how to turn what is stored into what an item holds."""

    def __init__(self, meta: DatasetMeta, output_unit: str) -> None:
        self.output_unit = check_unit(output_unit, "depth_output_unit")
        specs = {k: f for k, f in meta.features.items() if f.is_depth_map}
        self.video_keys = [k for k, f in specs.items() if f.is_video]
        self.image_keys = [k for k, f in specs.items() if f.is_image]
        self._quantization = {
            key: DepthQuantization.from_info(specs[key].info) for key in self.video_keys
        }
        self._units = {key: stored_unit(spec) for key, spec in specs.items()}

    @property
    def keys(self) -> list[str]:
        return [*self.video_keys, *self.image_keys]

    def video_frames(self, key: str, codes: np.ndarray) -> torch.Tensor:
        """Decoded codes `(T, H, W)` of a depth video as the item's `(T, 1, H, W)` depth."""
        return dequantize(codes, self._quantization[key], self.output_unit)

    def image(self, key: str, chw: torch.Tensor) -> torch.Tensor:
        """A depth image (raw, as decoded) in the output unit; as LeRobot, left as it is when
        the dataset does not record its unit."""
        unit = self._units[key]
        if unit is None or unit == self.output_unit:
            return chw
        return chw * MM_PER_METRE if unit == METRE else chw / MM_PER_METRE

    def stats(self, stats: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """stats.json with each depth feature's entry in the output unit (LeRobot converts its
        `meta.stats` so when it opens a dataset)."""
        if not stats:
            return stats
        changed = dict(stats)
        for key, unit in self._units.items():
            factor = 1.0 if unit is None else unit_factor(unit, self.output_unit)
            if key in stats and factor != 1.0:
                changed[key] = {
                    name: value if name == "count" else np.asarray(value) * factor
                    for name, value in stats[key].items()
                }
        return changed
