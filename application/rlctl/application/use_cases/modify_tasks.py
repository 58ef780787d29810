"""ModifyTasks: new task strings for a dataset's episodes (LeRobot's `modify_tasks`).

Per episode, as LeRobot resolves it: `episode_tasks[i]` when given (every row of the episode),
else each of its tasks found in `task_replacements` is replaced, else `new_task` when given,
else the task stays. At least one of the three is needed; episode indices must exist and every
replaced task must be one of the dataset's. Where LeRobot keeps only an episode's first task,
an episode with several tasks keeps each row's own (replaced) task here.

tasks.parquet, the rows' task_index, meta/episodes' tasks and info.json's total_tasks change;
tasks are numbered by first use. Without an output folder the dataset is edited in place
(LeRobot's only mode), safely: rebuilt beside the original under its lock, then swapped in.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from rlctl.application.ports.dataset_tools import (
    EpisodeEdit,
    EpisodeRef,
)
from rlctl.application.use_cases.dataset_rebuild import (
    DatasetTool,
    EditRequest,
    EditResult,
    edit_dataset,
)
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import InvalidInput


def _by_episode(value: Mapping[int, str]) -> dict[int, str]:
    return dict(value)


def _renames(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


@attrs.frozen
class TaskChanges:
    new_task: str | None = None
    episode_tasks: Mapping[int, str] = attrs.field(factory=dict, converter=_by_episode)
    task_replacements: Mapping[str, str] = attrs.field(factory=dict, converter=_renames)


class ModifyTasks(DatasetTool):
    def __call__(
        self,
        location: str,
        new_task: str | None = None,
        episode_tasks: Mapping[int, str] | None = None,
        task_replacements: Mapping[str, str] | None = None,
        output: str | None = None,
        *,
        force: bool = False,
    ) -> EditResult:
        changes = TaskChanges(new_task, episode_tasks or {}, task_replacements or {})
        _check_texts(changes)
        if output is None:
            with self._folders.lock(location):
                return self._modify(location, changes, output, force)
        return self._modify(location, changes, output, force)

    def _modify(
        self, location: str, changes: TaskChanges, output: str | None, force: bool
    ) -> EditResult:
        meta = self._meta_reader.read_meta(location)
        edits = episode_edits(meta, changes)
        return edit_dataset(
            self._rebuilder,
            self._folders,
            self._progress,
            location=location,
            output=output,
            template=meta,
            refs=[EpisodeRef(location, i) for i in range(meta.total_episodes)],
            description="rewriting the tasks",
            edits=edits,
            request=EditRequest.of(
                "modify-tasks",
                meta,
                force,
                new_task=changes.new_task,
                episode_tasks={str(k): v for k, v in sorted(changes.episode_tasks.items())},
                task_replacements=dict(changes.task_replacements),
            ),
        )


def _check_texts(changes: TaskChanges) -> None:
    if changes.new_task is None and not changes.episode_tasks and not changes.task_replacements:
        raise InvalidInput(
            "no task change given",
            where="modify-tasks",
            hint="give --new-task, --episode-tasks or --task-replacements (at least one)",
        )
    texts = [
        ("--new-task", changes.new_task),
        *((f"--episode-tasks {i}", t) for i, t in changes.episode_tasks.items()),
        *((f"--task-replacements {old!r}", new) for old, new in changes.task_replacements.items()),
    ]
    for where, text in texts:
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise InvalidInput(
                f"a task must be a non-empty string, got {text!r}",
                where=where,
                hint="describe the task in words",
            )


def episode_edits(meta: DatasetMeta, changes: TaskChanges) -> list[EpisodeEdit]:
    """Each episode's task change, in episode order (LeRobot's precedence)."""
    wrong = sorted(i for i in changes.episode_tasks if not 0 <= i < meta.total_episodes)
    if wrong:
        raise InvalidInput(
            f"episode(s) {', '.join(map(str, wrong))} do not exist: the dataset has "
            f"{meta.total_episodes}",
            where="--episode-tasks",
            hint=f"choose episodes between 0 and {max(meta.total_episodes - 1, 0)}",
        )
    unknown = sorted(t for t in changes.task_replacements if t not in meta.tasks)
    if unknown:
        raise InvalidInput(
            f"the dataset has no task {', '.join(repr(t) for t in unknown)}",
            where="--task-replacements",
            hint=f"its tasks: {', '.join(repr(t) for t in meta.tasks)}",
        )
    edits = []
    for record in meta.episodes:
        task = changes.episode_tasks.get(record.index)
        if task is not None:
            edits.append(EpisodeEdit(task=task))
            continue
        if not record.tasks:
            if changes.new_task is None:
                raise InvalidInput(
                    f"episode {record.index} has no task",
                    where="modify-tasks",
                    hint="give --new-task, or a task for it in --episode-tasks",
                )
            edits.append(EpisodeEdit(task=changes.new_task))
            continue
        default = changes.new_task
        renames = {
            old: changes.task_replacements.get(old, default if default is not None else old)
            for old in meta.tasks
        }
        edits.append(EpisodeEdit(tasks=renames))
    return edits
