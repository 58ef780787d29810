"""What every vector simulator over gymnasium shares: observations as the port reads them, and
gymnasium's errors turned into `SimulationError`s naming the task.

A worker that raised reports its own exception; a worker that died (segfault, OOM kill) shows as
a broken pipe, reported with its exit code. A simulator that failed is marked, so that closing
it terminates its workers instead of asking them politely.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from rlctl.adapters.sim.mujoco_gl import is_rendering_error, rendering_hint
from rlctl.application.ports.simulation import Observation, SimTask, SimulationError
from rlctl.domain.env_observation import flatten_observation
from rlctl.domain.errors import RlctlError

# A Box (not Dict) observation is reported under this raw key (→ `observation.state`).
PLAIN_OBSERVATION_KEY = "state"
T = TypeVar("T")


def as_observation(raw: Any) -> Observation:
    if isinstance(raw, Mapping):
        return flatten_observation(raw)
    return {PLAIN_OBSERVATION_KEY: np.asarray(raw)}


def task_place(task: SimTask) -> str:
    return f"env {task.suite}/{task.task_id}" + (f" ({task.name})" if task.name else "")


class GuardedSimulator:
    """The error handling of a vector simulator of one task; subclasses set `_task`."""

    _task: SimTask
    _failed: bool = False

    def _worker_processes(self) -> list[Any]:
        return []

    def _guard(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except RlctlError:
            self._failed = True
            raise
        except BaseException as error:
            self._failed = True
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise
            raise self._translate(what, error) from error

    def _translate(self, what: str, error: BaseException) -> SimulationError:
        where = task_place(self._task)
        if isinstance(error, EOFError | BrokenPipeError | ConnectionError):
            processes = self._worker_processes()
            codes = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            code = f" (exit code {codes[0]})" if codes else ""
            return SimulationError(
                f"a simulator worker process died during {what}{code}",
                where=where,
                hint="the simulator crashed outside Python (segfault, out of memory); "
                "run with --eval.use_async_envs=false to see it in-process",
            )
        return SimulationError(
            f"the simulator failed during {what}: {type(error).__name__}: {error}",
            where=where,
            hint=rendering_hint()
            if is_rendering_error(error)
            else "the worker's traceback is logged above; --debug shows where it was raised",
        )
