"""A dataset store in RAM: metadata by location, for tests and dry runs."""

from __future__ import annotations

from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import DatasetNotFound


class InMemoryDatasetStore:
    def __init__(self, datasets: dict[str, DatasetMeta] | None = None) -> None:
        self._metas: dict[str, DatasetMeta] = dict(datasets or {})
        self._sizes: dict[str, int] = {}

    def add(self, location: str, meta: DatasetMeta, size_bytes: int = 0) -> None:
        self._metas[location] = meta
        self._sizes[location] = size_bytes

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
