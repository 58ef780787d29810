"""Ports for datasets: reading what a dataset says about itself, and how big it is."""

from __future__ import annotations

from typing import Protocol

from rlctl.domain.dataset_meta import DatasetMeta


class DatasetMetaReader(Protocol):
    """Reads a dataset's metadata. `location` is a local root folder (or a store-specific key)."""

    def read_meta(self, location: str) -> DatasetMeta: ...

    def size_on_disk(self, location: str) -> int: ...
