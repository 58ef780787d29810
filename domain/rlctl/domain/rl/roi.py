"""A camera's region of interest for HIL-SERL (LeRobot's `crop_dataset_roi`): the rectangle kept
from each frame, `(top, left, height, width)` in pixels as LeRobot's crop parameters give it, and
the size it is resized to afterwards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from rlctl.domain.errors import InvalidInput

# LeRobot's default `resize_size`.
DEFAULT_SIZE = (128, 128)


@attrs.frozen
class RegionCrop:
    top: int
    left: int
    height: int
    width: int
    # The frame's size after the crop is resized: (height, width).
    size: tuple[int, int] = DEFAULT_SIZE

    def check_fits(self, frame_height: int, frame_width: int, where: str) -> None:
        """Refuse a rectangle that is empty or does not lie inside a frame of this size."""
        if min(self.height, self.width, *self.size) < 1 or min(self.top, self.left) < 0:
            raise InvalidInput(
                f"the region {self.box} or the size {self.size} is empty or negative",
                where=where,
                hint="give [top, left, height, width] with a positive height and width",
            )
        if self.top + self.height > frame_height or self.left + self.width > frame_width:
            raise InvalidInput(
                f"the region {self.box} goes past the {frame_height}x{frame_width} frame",
                where=where,
                hint=f"top + height <= {frame_height} and left + width <= {frame_width}",
            )

    @property
    def box(self) -> list[int]:
        return [self.top, self.left, self.height, self.width]


def parse_crops(raw: Mapping[str, Any], size: Sequence[int]) -> dict[str, RegionCrop]:
    """LeRobot's crop parameters file (`{camera: [top, left, height, width]}`) as crops."""
    if len(size) != 2 or any(not isinstance(v, int) or isinstance(v, bool) for v in size):
        raise InvalidInput(
            f"the resize size must be two whole numbers (height, width), got {list(size)}",
            where="--resize",
            hint="e.g. --resize 128 128",
        )
    crops: dict[str, RegionCrop] = {}
    for key, box in raw.items():
        numbers = list(box) if isinstance(box, list | tuple) else None
        if (
            numbers is None
            or len(numbers) != 4
            or any(not isinstance(v, int) or isinstance(v, bool) for v in numbers)
        ):
            raise InvalidInput(
                f"the region of {key!r} must be four whole numbers [top, left, height, width], "
                f"got {box!r}",
                where=str(key),
                hint='e.g. {"observation.images.front": [0, 0, 240, 320]}',
            )
        top, left, height, width = numbers
        crops[str(key)] = RegionCrop(top, left, height, width, (int(size[0]), int(size[1])))
    if not crops:
        raise InvalidInput(
            "no camera to crop", where="--crop-params", hint="name at least one camera"
        )
    return crops
