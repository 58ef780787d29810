"""Progress that draws nothing: `SilentProgress` for pipes, `RecordingProgress` for tests."""

from __future__ import annotations

from typing import Any

import attrs


class _SilentTask:
    def advance(self, n: int = 1) -> None:
        pass

    def update(self, **fields: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _SilentTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SilentProgress:
    def task(self, description: str, total: int | None = None) -> _SilentTask:
        return _SilentTask()


@attrs.define
class RecordedTask:
    description: str
    total: int | None
    done: int = 0
    fields: dict[str, Any] = attrs.field(factory=dict)
    closed: bool = False

    def advance(self, n: int = 1) -> None:
        self.done += n

    def update(self, **fields: Any) -> None:
        self.fields.update(fields)

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> RecordedTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordingProgress:
    """Keeps every task it was asked for, so a test can check what long work reported."""

    def __init__(self) -> None:
        self.tasks: list[RecordedTask] = []

    def task(self, description: str, total: int | None = None) -> RecordedTask:
        task = RecordedTask(description, total)
        self.tasks.append(task)
        return task
