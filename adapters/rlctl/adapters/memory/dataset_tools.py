"""The dataset-tool ports without files: rebuilds and folder swaps inside an
`InMemoryDatasetStore`, a scripted checker, statistics inputs from arrays.

A rebuilt dataset's episodes carry `columns["source"] = (location, episode)` and, when the
source episode had them, its per-episode statistics under `columns["stats"]` (feature ->
`FeatureStats`): what a use-case test needs to see where each episode came from.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence

import attrs
import numpy as np

from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.application.dataset_compat import edited_differences
from rlctl.application.ports.dataset_tools import (
    DatasetProblem,
    EditRecord,
    EpisodeEdit,
    EpisodeRef,
    FeatureChanges,
)
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import DatasetError, FeatureMismatch, InvalidInput
from rlctl.domain.statistics import FeatureStats, aggregate_stats, stats_to_json


class WriteLocks:
    """Write locks by location, within this process: a second writer is refused at once."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(self, location: str) -> Iterator[None]:
        with self._guard:
            if location in self._held:
                raise DatasetError("another writer is using this dataset", where=location)
            self._held.add(location)
        try:
            yield
        finally:
            with self._guard:
                self._held.discard(location)


class InMemoryRebuild:
    def __init__(
        self,
        store: InMemoryDatasetStore,
        output: str,
        template: DatasetMeta,
        fail_at: int | None,
        changes: FeatureChanges | None = None,
    ) -> None:
        self._store = store
        self._output = output
        self._template = template
        self._changes = changes
        self._fail_at = fail_at
        self._episodes: list[EpisodeRecord] = []
        self._tasks: list[str] = []
        self.aborted = False

    def add_episode(self, ref: EpisodeRef, edit: EpisodeEdit | None = None) -> EpisodeRecord:
        if self._fail_at is not None and len(self._episodes) == self._fail_at:
            raise OSError(f"simulated failure at episode {self._fail_at}")
        source = self._store.read_meta(ref.location)
        differences = edited_differences(self._template, source, self._changes)
        if differences:
            raise FeatureMismatch("; ".join(differences), where=ref.location)
        old = source.episodes[ref.episode]
        tasks = old.tasks
        if edit is not None and edit.task is not None:
            tasks = (edit.task,)
        elif edit is not None:
            tasks = tuple(dict.fromkeys(edit.tasks.get(t, t) for t in old.tasks))
        for task in tasks:
            if task not in self._tasks:
                self._tasks.append(task)
        added = dict(edit.columns) if edit is not None else {}
        start = sum(e.length for e in self._episodes)
        record = EpisodeRecord(
            index=len(self._episodes),
            length=old.length,
            tasks=tasks,
            dataset_from_index=start,
            dataset_to_index=start + old.length,
            columns={**old.columns, **added, "source": (ref.location, ref.episode)},
        )
        self._episodes.append(record)
        return record

    def finish(self, stats: Mapping[str, FeatureStats] | None = None) -> DatasetMeta:
        per_episode = [e.columns["stats"] for e in self._episodes if "stats" in e.columns]
        merged = aggregate_stats(per_episode) if per_episode else {}
        merged.update(dict(stats or {}))
        meta = attrs.evolve(
            self._template,
            total_episodes=len(self._episodes),
            total_frames=sum(e.length for e in self._episodes),
            tasks=tuple(self._tasks),
            episodes=tuple(self._episodes),
            stats=stats_to_json(merged) if merged else None,
        )
        self._store.add(self._output, meta)
        return meta

    def abort(self) -> None:
        self.aborted = True


class InMemoryDatasetRebuilder:
    """`DatasetRebuilder` into the store; `fail_at=n` raises when the n-th episode is added."""

    def __init__(self, store: InMemoryDatasetStore, fail_at: int | None = None) -> None:
        self._store = store
        self._fail_at = fail_at
        self.sessions: list[InMemoryRebuild] = []

    def start(
        self, output: str, template: DatasetMeta, changes: FeatureChanges | None = None
    ) -> InMemoryRebuild:
        session = InMemoryRebuild(self._store, output, template, self._fail_at, changes)
        self.sessions.append(session)
        return session


class InMemoryDatasetFolders:
    """`DatasetFolders` over the store's locations."""

    def __init__(self, store: InMemoryDatasetStore, locks: WriteLocks | None = None) -> None:
        self._store = store
        self.locks = locks or WriteLocks()
        # Each location's edit journal, oldest first.
        self.journals: dict[str, list[EditRecord]] = {}

    def _metas(self) -> dict[str, DatasetMeta]:
        return self._store._metas  # the store is this module's sibling; no public listing

    def exists(self, location: str) -> bool:
        return location in self._metas()

    def is_empty(self, location: str) -> bool:
        return not self.exists(location)

    def staging_for(self, location: str) -> str:
        return f"{location}.rlctl-staging"

    def replace(
        self, staged: str, location: str, keep_old_at: str | None = None
    ) -> tuple[str, ...]:
        metas = self._metas()
        old = metas.pop(location, None)
        metas[location] = metas.pop(staged)
        self.journals[location] = self.journals.pop(staged, [])
        if keep_old_at is not None and old is not None:
            metas[keep_old_at] = old
        return ()

    def remove(self, location: str) -> None:
        self._metas().pop(location, None)
        self.journals.pop(location, None)

    def last_edit(self, location: str) -> EditRecord | None:
        journal = self.journals.get(location)
        return journal[-1] if journal else None

    def record_edit(self, staged: str, location: str, record: EditRecord) -> None:
        self.journals[staged] = [*self.journals.get(location, []), record]

    def clean_leftovers(self, location: str) -> tuple[str, ...]:
        with self.lock(location):
            return ()

    def lock(self, location: str) -> contextlib.AbstractContextManager[None]:
        return self.locks.hold(location)


@attrs.define
class ScriptedCheck:
    opening_problems: list[DatasetProblem]
    files: dict[str, list[DatasetProblem]]
    checked: list[str] = attrs.field(factory=list)

    @property
    def units(self) -> list[str]:
        return list(self.files)

    def check(self, unit: str) -> list[DatasetProblem]:
        self.checked.append(unit)
        return list(self.files[unit])


class ScriptedDatasetChecker:
    """`DatasetChecker` answering what it was given: problems when opening and per file."""

    def __init__(
        self,
        opening: Sequence[DatasetProblem] = (),
        files: Mapping[str, Sequence[DatasetProblem]] | None = None,
    ) -> None:
        self._opening = list(opening)
        self._files = {k: list(v) for k, v in (files or {}).items()}
        self.opened: list[ScriptedCheck] = []

    def open(self, location: str) -> ScriptedCheck:
        check = ScriptedCheck(self._opening, self._files)
        self.opened.append(check)
        return check


class InMemoryStatsAccess:
    """`DatasetStatsAccess` over arrays: per location, episode -> key -> values (numeric
    features (length, ...), cameras uint8 (length, H, W, C)); writes are kept in `written`."""

    def __init__(
        self,
        data: Mapping[str, Mapping[int, Mapping[str, np.ndarray]]],
        locks: WriteLocks | None = None,
    ) -> None:
        self._data = data
        self.written: dict[str, tuple[dict, dict]] = {}
        self.locks = locks or WriteLocks()

    def lock(self, location: str) -> contextlib.AbstractContextManager[None]:
        return self.locks.hold(location)

    def _episodes(self, location: str) -> Mapping[int, Mapping[str, np.ndarray]]:
        if location not in self._data:
            raise InvalidInput("no data for this location", where=location)
        return self._data[location]

    def numeric_columns(
        self, location: str, keys: Sequence[str]
    ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        for episode, columns in sorted(self._episodes(location).items()):
            yield episode, {key: np.asarray(columns[key]) for key in keys}

    def frames(self, location: str, key: str, episode: int, indices: Sequence[int]) -> np.ndarray:
        return np.asarray(self._episodes(location)[episode][key])[list(indices)]

    def write_stats(
        self,
        location: str,
        episode_stats: Mapping[int, Mapping[str, FeatureStats]],
        stats: Mapping[str, FeatureStats],
    ) -> None:
        self.written[location] = (dict(episode_stats), dict(stats))
