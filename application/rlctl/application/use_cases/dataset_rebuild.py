"""What merge, split, delete-episodes and convert share: building a dataset from episode refs,
with progress, removing the half-built output on any failure (Ctrl-C included).

An edit in place also keeps a journal (`EditRecord`, written with the new folder before the
swap): the same request made again on the dataset that edit produced — a blind retry after a
kill, or a command run twice — is refused, since applying an index-based edit to its own result
changes other episodes (`--force` applies it again on purpose).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import structlog

from rlctl.application.ports.dataset import DatasetMetaReader
from rlctl.application.ports.dataset_tools import (
    DatasetFolders,
    DatasetRebuilder,
    EditRecord,
    EpisodeEdit,
    EpisodeRef,
    FeatureChanges,
)
from rlctl.application.ports.progress import Progress
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import InvalidInput
from rlctl.domain.statistics import FeatureStats

log = structlog.get_logger(__name__)


@attrs.frozen
class EditResult:
    """A dataset written by a tool: where, and what it holds."""

    output: str
    episodes: int
    frames: int
    tasks: int
    # For each new episode, where it came from.
    sources: tuple[EpisodeRef, ...] = attrs.field(repr=False)
    # Edits in place: what the folder held besides the dataset, carried into the new one.
    kept: tuple[str, ...] = ()


class EditAlreadyApplied(InvalidInput):
    """The same edit was already made to the dataset as it is now."""


def dataset_fingerprint(meta: DatasetMeta) -> str:
    """What identifies a dataset's content for the journal: fps, features, tasks and episodes
    (lengths and tasks). Equal for a dataset and its copy; different after any edit."""
    body = {
        "fps": meta.fps,
        "features": {k: [f.dtype, list(f.shape)] for k, f in meta.features.items()},
        "tasks": list(meta.tasks),
        "frames": meta.total_frames,
        "episodes": [[e.length, list(e.tasks)] for e in meta.episodes],
    }
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@attrs.frozen
class EditRequest:
    """An edit in place as the journal knows it: the tool, its arguments (JSON-able), the
    fingerprint of the dataset it starts from, and whether to apply it even when the dataset is
    what the same request already produced."""

    tool: str
    arguments: Mapping[str, Any]
    before: str
    force: bool = False

    @classmethod
    def of(cls, tool: str, meta: DatasetMeta, force: bool = False, **arguments: Any) -> EditRequest:
        return cls(tool, arguments, dataset_fingerprint(meta), force)

    @property
    def canonical(self) -> str:
        return json.dumps(self.arguments, sort_keys=True, ensure_ascii=False, default=str)

    def record(self, after: DatasetMeta) -> EditRecord:
        return EditRecord(
            tool=self.tool,
            request=self.canonical,
            before=self.before,
            after=dataset_fingerprint(after),
        )


def refuse_repeat(folders: DatasetFolders, location: str, request: EditRequest) -> None:
    """Refuse `request` when the dataset is what the same request already made of it."""
    if request.force:
        return
    last = folders.last_edit(location)
    if last is None or (last.tool, last.request, last.after) != (
        request.tool,
        request.canonical,
        request.before,
    ):
        return
    when = f" on {last.at}" if last.at else ""
    raise EditAlreadyApplied(
        f"this {request.tool} ({request.canonical}) was already applied{when}, and the dataset "
        "is the one it produced: applying it again would change it once more (an index-based "
        "edit would hit other episodes)",
        where=location,
        hint="nothing to do if this retries an interrupted or repeated command; pass --force "
        "to apply it again to the dataset as it is now",
    )


def build(
    rebuilder: DatasetRebuilder,
    progress: Progress,
    *,
    output: str,
    template: DatasetMeta,
    refs: Sequence[EpisodeRef],
    stats: Mapping[str, FeatureStats] | None = None,
    description: str = "copying episodes",
    changes: FeatureChanges | None = None,
    edits: Sequence[EpisodeEdit | None] | None = None,
) -> EditResult:
    """`edits`, when given, has one entry per ref: how that episode changes."""
    return _build(
        rebuilder,
        progress,
        output=output,
        template=template,
        refs=refs,
        stats=stats,
        description=description,
        changes=changes,
        edits=edits,
    )[0]


def _build(
    rebuilder: DatasetRebuilder,
    progress: Progress,
    *,
    output: str,
    template: DatasetMeta,
    refs: Sequence[EpisodeRef],
    stats: Mapping[str, FeatureStats] | None = None,
    description: str = "copying episodes",
    changes: FeatureChanges | None = None,
    edits: Sequence[EpisodeEdit | None] | None = None,
) -> tuple[EditResult, DatasetMeta]:
    if not refs:
        raise InvalidInput("no episodes to write", where=output, hint="select some episodes")
    if edits is not None and len(edits) != len(refs):
        raise ValueError("one edit per episode")
    session = (
        rebuilder.start(output, template, changes) if changes else rebuilder.start(output, template)
    )
    task = progress.task(description, total=len(refs))
    try:
        for number, ref in enumerate(refs):
            edit = edits[number] if edits is not None else None
            if edit is None:
                session.add_episode(ref)
            else:
                session.add_episode(ref, edit)
            task.advance()
        meta = session.finish(stats)
    except BaseException:
        session.abort()
        raise
    finally:
        task.close()
    log.debug("dataset written", output=output, episodes=meta.total_episodes)
    result = EditResult(
        output, meta.total_episodes, meta.total_frames, len(meta.tasks), tuple(refs)
    )
    return result, meta


class DatasetTool:
    """What every dataset tool holds: it reads the metadata, rebuilds episodes into a new folder
    (swapped in under the dataset's lock when it edits in place) and reports progress."""

    def __init__(
        self,
        meta_reader: DatasetMetaReader,
        rebuilder: DatasetRebuilder,
        folders: DatasetFolders,
        progress: Progress,
    ) -> None:
        self._meta_reader = meta_reader
        self._rebuilder = rebuilder
        self._folders = folders
        self._progress = progress


def require_new_output(folders: DatasetFolders, output: str, sources: Sequence[str]) -> None:
    """Tools never write into a dataset they read, nor over anything already there."""
    if output in sources:
        raise InvalidInput(
            "the output is one of the inputs",
            where=output,
            hint="write to a new folder (delete-episodes without -o edits in place safely)",
        )
    if not folders.is_empty(output):
        raise InvalidInput(
            "a file or folder with content is already there",
            where=output,
            hint="choose a new folder for the output, or remove this one first",
        )


def build_in_place(
    rebuilder: DatasetRebuilder,
    folders: DatasetFolders,
    progress: Progress,
    *,
    location: str,
    template: DatasetMeta,
    refs: Sequence[EpisodeRef],
    keep_old_at: str | None = None,
    description: str = "copying episodes",
    changes: FeatureChanges | None = None,
    edits: Sequence[EpisodeEdit | None] | None = None,
    request: EditRequest | None = None,
) -> EditResult:
    """Build the replacement beside `location`, then swap it in: until the swap the original is
    untouched and readable; a failure before it leaves the original as it was. With `request`,
    a repeat of the dataset's last edit is refused, and the edit is added to its journal."""
    if request is not None:
        refuse_repeat(folders, location, request)
    staged = folders.staging_for(location)
    result, meta = _build(
        rebuilder,
        progress,
        output=staged,
        template=template,
        refs=refs,
        description=description,
        changes=changes,
        edits=edits,
    )
    try:
        if request is not None:
            folders.record_edit(staged, location, request.record(meta))
    except BaseException:
        folders.remove(staged)
        raise
    kept = folders.replace(staged, location, keep_old_at=keep_old_at)
    if kept:
        log.info("kept beside the data", root=location, entries=list(kept))
    return attrs.evolve(result, output=location, kept=kept)


def edit_dataset(
    rebuilder: DatasetRebuilder,
    folders: DatasetFolders,
    progress: Progress,
    *,
    location: str,
    output: str | None,
    template: DatasetMeta,
    refs: Sequence[EpisodeRef],
    description: str,
    changes: FeatureChanges | None = None,
    edits: Sequence[EpisodeEdit | None] | None = None,
    request: EditRequest | None = None,
) -> EditResult:
    """A whole dataset copied with changes: into `output` (new), or in place when it is None.
    The caller holds the dataset's lock for an edit in place."""
    if output is None:
        return build_in_place(
            rebuilder,
            folders,
            progress,
            location=location,
            template=template,
            refs=refs,
            description=description,
            changes=changes,
            edits=edits,
            request=request,
        )
    require_new_output(folders, output, [location])
    return build(
        rebuilder,
        progress,
        output=output,
        template=template,
        refs=refs,
        description=description,
        changes=changes,
        edits=edits,
    )
