"""Which task of a suite runs when: tasks handed out in order to a few runners, the next one's
envs started ahead, and the first failure stopping everyone.

`SuiteSchedule` holds a suite's vector simulators in task order. Each runner (one per task run
at once) `take`s the next task, runs it, and closes it. When a running task has reset its envs
it calls `prefetch`, which starts the envs of the first task nobody has taken yet, once: with N
runners at most N + 1 tasks' envs are alive (the N running and the one started ahead), and with
one runner this is the sequential evaluation with its next task prefetched. A schedule made with
`prefetch=False` starts nothing ahead: each task's envs start when its runner resets them,
after the runner closed its previous task's, so at most N tasks' envs are alive (LeRobot's way).

`run_slots` runs the runners: in the calling thread when there is one (no thread, Ctrl-C as
ever), else in threads. A runner that fails sets `stop`; the others notice at their next step
(`check`) and end, and the first failure is raised once every runner has returned. Ctrl-C in
the waiting thread stops the runners the same way before it propagates.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol


class Startable(Protocol):
    def start(self) -> None: ...


class TasksStopped(Exception):
    """Raised inside a runner when another runner failed: its task is abandoned."""


class SuiteSchedule:
    def __init__(self, envs: Sequence[Startable], *, prefetch: bool = True) -> None:
        self._envs = list(envs)
        self.prefetching = prefetch
        self._next = 0
        self._started: set[int] = set()
        self._lock = threading.Lock()
        self.stop = threading.Event()

    def take(self) -> int | None:
        """The index of the next task to run, or None when none is left (or a runner failed)."""
        with self._lock:
            if self.stop.is_set() or self._next >= len(self._envs):
                return None
            index, self._next = self._next, self._next + 1
            self._started.add(index)
            return index

    def prefetch(self) -> None:
        """Start the envs of the first task not taken yet, unless they are already starting
        (or the schedule does not prefetch)."""
        if not self.prefetching:
            return
        with self._lock:
            index = self._next
            if self.stop.is_set() or index >= len(self._envs) or index in self._started:
                return
            self._started.add(index)
            # Under the lock: the runner that takes this task finds its start under way.
            self._envs[index].start()

    def check(self) -> None:
        """Raise `TasksStopped` when another runner has failed."""
        if self.stop.is_set():
            raise TasksStopped


def run_slots(count: int, runner: Callable[[int], None], stop: threading.Event) -> None:
    """Run `runner(slot)` for slots 0..count-1 at once; raise the first failure."""
    if count <= 1:
        runner(0)
        return
    failures: list[BaseException] = []
    lock = threading.Lock()

    def guarded(slot: int) -> None:
        try:
            runner(slot)
        except BaseException as error:
            with lock:
                failures.append(error)
            stop.set()

    threads = [
        threading.Thread(target=guarded, args=(slot,), name=f"eval-tasks-{slot}", daemon=True)
        for slot in range(count)
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except BaseException:
        # Ctrl-C while waiting: the runners stop at their next step; wait for them, so that
        # nothing steps an env the caller is about to close.
        stop.set()
        for thread in threads:
            thread.join()
        raise
    real = [f for f in failures if not isinstance(f, TasksStopped)]
    if real:
        raise real[0]
