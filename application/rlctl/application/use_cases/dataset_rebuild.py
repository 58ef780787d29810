"""What merge, split, delete-episodes and convert share: building a dataset from episode refs,
with progress, removing the half-built output on any failure (Ctrl-C included)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import structlog

from rlctl.application.ports.dataset import DatasetMetaReader
from rlctl.application.ports.dataset_tools import (
    DatasetFolders,
    DatasetRebuilder,
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
    return EditResult(output, meta.total_episodes, meta.total_frames, len(meta.tasks), tuple(refs))


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
) -> EditResult:
    """Build the replacement beside `location`, then swap it in: until the swap the original is
    untouched and readable; a failure before it leaves the original as it was."""
    staged = folders.staging_for(location)
    result = build(
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
        folders.replace(staged, location, keep_old_at=keep_old_at)
    except BaseException:
        folders.remove(staged)
        raise
    return attrs.evolve(result, output=location)


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
