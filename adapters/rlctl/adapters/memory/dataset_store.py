"""A dataset store in RAM: metadata by location, for tests and dry runs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import DatasetNotFound
from rlctl.domain.language import ColumnSummary


class InMemoryDatasetStore:
    def __init__(self, datasets: dict[str, DatasetMeta] | None = None) -> None:
        self._metas: dict[str, DatasetMeta] = dict(datasets or {})
        self._sizes: dict[str, int] = {}
        self._language: dict[str, Mapping[str, ColumnSummary]] = {}

    def add(
        self,
        location: str,
        meta: DatasetMeta,
        size_bytes: int = 0,
        language: Mapping[str, ColumnSummary] | None = None,
    ) -> None:
        self._metas[location] = meta
        self._sizes[location] = size_bytes
        self._language[location] = dict(language or {})

    def read_meta(self, location: str) -> DatasetMeta:
        try:
            return self._metas[location]
        except KeyError:
            raise DatasetNotFound(
                "no dataset here",
                where=location,
                hint=f"known in memory: {', '.join(sorted(self._metas)) or '(none)'}",
            ) from None

    def size_on_disk(self, location: str) -> int:
        self.read_meta(location)
        return self._sizes.get(location, 0)

    def summarize_language(self, location: str) -> Mapping[str, ColumnSummary]:
        self.read_meta(location)
        return self._language.get(location, {})

    def metadata_root(self, repo_id: str, revision: str | None) -> Path:
        """As a streamed dataset's `meta/`: the dataset stored under `repo_id` (revisions are
        not kept in memory)."""
        self.read_meta(repo_id)
        return Path(repo_id)
