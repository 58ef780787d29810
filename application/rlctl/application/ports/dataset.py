"""Ports for datasets: reading what a dataset says about itself, and how big it is.

Items are read by the training backend and by `rlctl.api.open_dataset`, both adapters' business
(torch `Dataset`s): no use case reads items through a port.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.language import ColumnSummary


class DatasetMetaReader(Protocol):
    """Reads a dataset's metadata. `location` is a local root folder (or a store-specific key)."""

    def read_meta(self, location: str) -> DatasetMeta: ...

    def size_on_disk(self, location: str) -> int: ...


class LanguageAnnotations(Protocol):
    """Counts a dataset's language annotations (`rlctl.domain.language`)."""

    def summarize_language(self, location: str) -> Mapping[str, ColumnSummary]:
        """Per language column the dataset has, its rows by style and camera (empty: none)."""
        ...


class StreamedDatasets(Protocol):
    """Hub datasets read as they stream (`--dataset.streaming=true`): only `meta/` is local."""

    def metadata_root(self, repo_id: str, revision: str | None) -> Path:
        """The local folder holding the dataset's `meta/` (fetched, or from the cache);
        offline, an error saying streaming needs the Hub."""
        ...
