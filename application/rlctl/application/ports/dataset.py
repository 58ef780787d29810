"""Ports for datasets: reading what a dataset says about itself, how big it is, and its items."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from rlctl.domain.dataset_meta import DatasetMeta

# Applied to each camera's frames (a framework tensor, channels first) when an item is built.
ImageTransform = Callable[[Any], Any]


class DatasetMetaReader(Protocol):
    """Reads a dataset's metadata. `location` is a local root folder (or a store-specific key)."""

    def read_meta(self, location: str) -> DatasetMeta: ...

    def size_on_disk(self, location: str) -> int: ...


class DatasetView(Protocol):
    """An opened dataset: items by position, as LeRobot's `__getitem__` returns them.

    An item maps each feature key to its value (tensors in the adapter's framework), adds
    `<key>_is_pad` masks for windowed keys and the `task` string. Positions count the selected
    episodes' frames from 0.
    """

    @property
    def meta(self) -> DatasetMeta: ...

    def __len__(self) -> int: ...

    def __getitem__(self, idx: int) -> dict[str, Any]: ...

    def get_items(self, indices: Iterable[int]) -> list[dict[str, Any]]:
        """Several items at once; cheaper than one by one (video files decoded once per call)."""
        ...

    def set_image_transforms(self, image_transforms: ImageTransform | None) -> None: ...

    def clear_image_transforms(self) -> None: ...

    def close(self) -> None:
        """Release open files; the view reopens them if used again."""
        ...


class DatasetSource(Protocol):
    """Opens datasets for reading."""

    def open(
        self,
        location: str,
        *,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        episodes: Iterable[int] | None = None,
        image_transforms: ImageTransform | None = None,
    ) -> DatasetView: ...
