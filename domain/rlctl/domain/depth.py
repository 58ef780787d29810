"""Depth maps as LeRobot 0.6.1 records them: 12-bit codes in a lossless gray12le HEVC video.

A depth camera is a visual feature of one channel whose `info` says `is_depth_map: true`. Each
frame (integer millimetres, or float metres) is quantized to codes 0…4095, logarithmically by
default (more codes near the camera, where depth sensors are precise), and the codes are encoded
losslessly (x265 `lossless=1`, pixel format gray12le). The feature's `info` records the quantizer
(`video.depth_min`, `video.depth_max`, `video.shift` in metres, `video.use_log`) and the unit the
frames came in (`depth_unit`); reading dequantizes to float32 millimetres by default, and
statistics, computed on the frames as they came, are converted to that unit when read.

The arithmetic is LeRobot's (`lerobot.datasets.depth_utils`), in the same float32 steps, so the
codes are the ones LeRobot would write.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.yes_no import parse_bool

DEPTH_QUANT_BITS = 12
DEPTH_QMAX = (1 << DEPTH_QUANT_BITS) - 1
DEPTH_PIX_FMT = "gray12le"
METRE = "m"
MILLIMETRE = "mm"
DEPTH_UNITS = (METRE, MILLIMETRE)
# What LeRobot returns unless told otherwise (`depth_output_unit`).
DEFAULT_OUTPUT_UNIT = MILLIMETRE
MM_PER_METRE = 1000.0
# The frame dtypes LeRobot stores depth maps from (a raw TIFF holds exactly these).
DEPTH_FRAME_DTYPES = (np.dtype(np.uint16), np.dtype(np.float32))


def is_depth_map(info: Mapping[str, Any] | None, legacy: Mapping[str, Any] | None = None) -> bool:
    """LeRobot's test: `is_depth_map` (or the older `video.is_depth_map`) in the feature's `info`,
    or `video.is_depth_map` in a legacy `video_info` block (`legacy`)."""
    info = info or {}
    legacy = legacy or {}
    return bool(
        info.get("is_depth_map")
        or info.get("video.is_depth_map")
        or legacy.get("video.is_depth_map")
    )


def infer_depth_unit(dtype: np.dtype | type) -> str:
    """LeRobot's rule: floating frames are metres, integer frames millimetres."""
    return METRE if np.issubdtype(np.dtype(dtype), np.floating) else MILLIMETRE


def check_unit(unit: str, where: str) -> str:
    if unit not in DEPTH_UNITS:
        raise InvalidInput(
            f"depth unit must be 'm' or 'mm', got {unit!r}",
            where=where,
            hint="use 'mm' (LeRobot's default) or 'm'",
        )
    return unit


def unit_factor(stored: str, output: str) -> float:
    """What values in `stored` units are multiplied by to be in `output` units."""
    if stored == output:
        return 1.0
    return MM_PER_METRE if stored == METRE else 1.0 / MM_PER_METRE


def _positive_log_range(instance: DepthQuantization, _attribute: Any, _value: Any) -> None:
    if not instance.depth_max > instance.depth_min:
        raise InvalidInput(
            f"depth_max ({instance.depth_max}) must exceed depth_min ({instance.depth_min})",
            where="video.depth_max",
        )
    if instance.use_log and instance.depth_min + instance.shift <= 0:
        raise InvalidInput(
            "logarithmic depth quantization needs depth_min + shift > 0, got "
            f"{instance.depth_min} + {instance.shift}",
            where="video.shift",
        )


@attrs.frozen
class DepthQuantization:
    """The quantizer of a depth video: LeRobot's `DepthEncoderConfig` fields, in metres."""

    depth_min: float = attrs.field(default=0.01, converter=float)
    depth_max: float = attrs.field(default=10.0, converter=float)
    shift: float = attrs.field(default=3.5, converter=float)
    use_log: bool = attrs.field(default=True, converter=parse_bool, validator=_positive_log_range)

    def to_info(self) -> dict[str, Any]:
        """The `video.*` keys LeRobot records after the encoder's other settings."""
        return {
            "video.depth_min": self.depth_min,
            "video.depth_max": self.depth_max,
            "video.shift": self.shift,
            "video.use_log": self.use_log,
        }

    @classmethod
    def from_info(cls, info: Mapping[str, Any] | None) -> DepthQuantization:
        """From a feature's `info`; missing or null keys take LeRobot's defaults."""
        info = info or {}
        kwargs = {
            name: info[f"video.{name}"]
            for name in ("depth_min", "depth_max", "shift", "use_log")
            if info.get(f"video.{name}") is not None
        }
        return cls(**kwargs)

    def scale_offset(self) -> tuple[float, float]:
        """Code c dequantizes to `c * scale + offset` (then exp and less shift in log mode)."""
        if self.use_log:
            low = math.log(self.depth_min + self.shift)
            high = math.log(self.depth_max + self.shift)
            return (high - low) / DEPTH_QMAX, low
        return (self.depth_max - self.depth_min) / DEPTH_QMAX, self.depth_min

    def quantize(self, depth: np.ndarray, unit: str | None = None) -> np.ndarray:
        """Codes (uint16, 0…4095) of a depth map `(H, W)`; `unit` defaults to the dtype's."""
        resolved = unit or infer_depth_unit(depth.dtype)
        values = depth.astype(np.float32)
        per_unit = 1.0 if resolved == METRE else MM_PER_METRE
        low = np.float32(self.depth_min * per_unit)
        high = np.float32(self.depth_max * per_unit)
        shift = np.float32(self.shift * per_unit)
        norm: np.ndarray
        if self.use_log:
            log_low = math.log(float(low + shift))
            log_high = math.log(float(high + shift))
            norm = (np.log(values + shift) - log_low) / (log_high - log_low)
        else:
            norm = (values - low) / (high - low)
        return np.rint(norm * DEPTH_QMAX).clip(0, DEPTH_QMAX).astype(np.uint16, copy=False)


def depth_frame(key: str, value: Any, height: int, width: int) -> np.ndarray:
    """A depth frame as LeRobot takes it: `(H, W)`, `(H, W, 1)` or `(1, H, W)`, uint16
    millimetres or float32 metres; returned `(H, W, 1)`."""
    array = np.asarray(value)
    expected = (
        f"a depth map of shape {(height, width, 1)}, {(1, height, width)} or {(height, width)}, "
        "uint16 millimetres or float32 metres"
    )
    if array.shape in ((height, width, 1), (1, height, width), (height, width)):
        array = array.reshape(height, width, 1)
    else:
        raise FeatureMismatch(
            f"expected {expected}, got {array.dtype} array of shape {array.shape}",
            where=f"frame[{key!r}]",
        )
    if array.dtype not in DEPTH_FRAME_DTYPES:
        raise FeatureMismatch(
            f"expected {expected}, got {array.dtype} values",
            where=f"frame[{key!r}]",
            hint="convert with .astype(np.uint16) for millimetres or .astype(np.float32) for "
            "metres (LeRobot stores depth maps of these two types only)",
        )
    return array
