"""How many environments to run side by side, and whether in worker processes or in-process.

LeRobot picks `batch_size = min(0.7 x cores, n_episodes, 64)` and always uses subprocess
workers. That is the right call for slow simulators on many cores, and the wrong one for cheap
ones: a PushT step costs a few milliseconds, less than shipping it to a worker and back, and on
two cores the workers only fight the policy for CPU. Here the choice comes from a short
measurement (one env step, one policy call at two batch sizes) and a cost model of a whole
evaluation; `plan_rollouts` returns the cheapest plan, or honours what the user forced.

The model is deliberately coarse: it only has to rank plans, not predict wall time.

A suite run with `max_parallel_tasks = N` (`task_slots`) runs N tasks at once, each planned as if
it had a machine of `cores // N` cores to itself: its batch size is chosen (or its forced batch
sharded) for that share, so that N tasks' workers together never outnumber the cores.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs

from rlctl.domain.errors import ConfigError, InvalidInput

MAX_BATCH_SIZE = 64
# LeRobot leaves ~30 % of the cores for the main process and inference.
CORE_SHARE = 0.7
# Sending actions to, and reading observations back from, one worker process per step (pipes
# plus shared memory). Measured on gymnasium's AsyncVectorEnv, it is a fraction of a
# millisecond per worker on an idle machine; the figure is rounded up for busy ones.
IPC_S_PER_ENV = 4e-4
IPC_S_PER_STEP = 3e-4
# Starting a forkserver worker before the env's own imports run.
PROCESS_START_S = 0.3


def worker_count(n_envs: int, cpu_count: int) -> int:
    """Worker processes for `n_envs` envs: one per env, but never more than the cores (each
    worker then steps a shard of the envs; forcing a large batch on few cores stays sane)."""
    return max(1, min(n_envs, cpu_count))


@attrs.frozen
class TaskSlots:
    """How a suite's tasks share the machine: `count` tasks run at once, and each running task's
    env workers get `cores_per_task` of the cores (its batch is sharded over that many worker
    processes at most)."""

    count: int
    cores_per_task: int


def task_slots(max_parallel_tasks: int, n_tasks: int, cpu_count: int) -> TaskSlots:
    """LeRobot's `max_parallel_tasks` within the core budget.

    More tasks at once than there are tasks is clamped (like a batch larger than n_episodes);
    more than the cores is refused: each task running at once needs at least a core for its
    envs, or the tasks only queue behind each other while their envs hold memory.
    """
    cores = max(1, cpu_count)
    if max_parallel_tasks < 1:
        raise ConfigError(
            f"max_parallel_tasks must be at least 1, got {max_parallel_tasks}",
            where="env.max_parallel_tasks",
        )
    if max_parallel_tasks > cores:
        raise ConfigError(
            f"max_parallel_tasks={max_parallel_tasks} is more than the {cores} cores this "
            "evaluation may use: each task running at once needs at least a core for its envs",
            where="env.max_parallel_tasks",
            hint=f"use at most {cores}; --eval.batch_size runs more episodes of a task at once",
        )
    count = min(max_parallel_tasks, max(1, n_tasks))
    return TaskSlots(count, max(1, cores // count))


def auto_batch_size(n_episodes: int, cpu_count: int) -> int:
    """LeRobot's default: ~0.7 x cores, capped by n_episodes and 64, at least 1."""
    by_cpu = max(1, math.floor(max(1, cpu_count) * CORE_SHARE))
    return max(1, min(by_cpu, n_episodes, MAX_BATCH_SIZE))


def clamp_batch_size(batch_size: int, n_episodes: int) -> int:
    """A batch larger than the number of episodes is clamped, not an error."""
    if batch_size < 0:
        raise InvalidInput(
            f"batch_size must be 0 (auto) or positive, got {batch_size}", where="eval.batch_size"
        )
    return max(1, min(batch_size, n_episodes))


def _calls(value: Iterable[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    return tuple(value)


@attrs.frozen
class Timings:
    """What a short probe measured, in seconds."""

    env_step_s: float
    # Building one env from scratch, package import included: what each worker process pays.
    env_start_s: float
    # (batch size, seconds) of policy calls; one or two points of a linear model.
    policy_calls: tuple[tuple[int, float], ...] = attrs.field(converter=_calls, default=())
    n_action_steps: int = 1
    episode_steps: int = 300

    def policy_s(self, batch_size: int) -> float:
        points = sorted(self.policy_calls)
        if not points:
            return 0.0
        if len(points) == 1 or points[-1][0] == points[0][0]:
            return points[0][1]
        (b0, t0), (b1, t1) = points[0], points[-1]
        slope = max(0.0, (t1 - t0) / (b1 - b0))
        return max(0.0, t0 + slope * (batch_size - b0))


@attrs.frozen
class RolloutPlan:
    batch_size: int
    use_async: bool
    estimated_s: float | None = None
    reason: str = ""


def estimate_s(
    timings: Timings,
    n_episodes: int,
    n_tasks: int,
    batch_size: int,
    use_async: bool,
    cpu_count: int,
) -> float:
    """Modelled wall time of the whole evaluation with this batch size and mode."""
    n_batches = math.ceil(n_episodes / batch_size)
    policy = timings.policy_s(batch_size) / max(1, timings.n_action_steps)
    if use_async:
        workers = max(1, cpu_count - 1)  # one core stays with the main process and the policy
        env = timings.env_step_s * math.ceil(batch_size / workers)
        env += IPC_S_PER_STEP + IPC_S_PER_ENV * batch_size
        start = PROCESS_START_S + timings.env_start_s * math.ceil(batch_size / max(1, cpu_count))
    else:
        env = timings.env_step_s * batch_size
        start = 0.0
    return n_tasks * (start + n_batches * timings.episode_steps * (env + policy))


def plan_rollouts(
    n_episodes: int,
    cpu_count: int,
    timings: Timings | None = None,
    *,
    batch_size: int = 0,
    use_async: bool | None = None,
    n_tasks: int = 1,
    workers_only: bool = False,
) -> RolloutPlan:
    """The batch size and mode to run with. `batch_size > 0` and `use_async` force a choice.

    Without timings the plan is LeRobot's (auto batch size, workers when more than one env).
    One env runs in-process (a worker would only add a round trip per step), unless
    `workers_only`: tasks running at once must not share a process, where simulators keep global
    state (Meta-World's goal sampling, for one), so every env then runs in a worker.
    """
    if n_episodes < 1:
        raise InvalidInput(f"n_episodes must be >= 1, got {n_episodes}", where="eval.n_episodes")
    if workers_only:
        if use_async is False:
            raise ConfigError(
                "tasks running at once (max_parallel_tasks > 1) step their envs in worker "
                "processes, and --eval.use_async_envs=false asks for them in this process",
                where="eval.use_async_envs",
                hint="leave eval.use_async_envs unset (or true), or set env.max_parallel_tasks=1",
            )
        use_async = True
    min_async = 1 if workers_only else 2
    forced_batch = clamp_batch_size(batch_size, n_episodes) if batch_size else None
    if forced_batch is not None and use_async is not None:
        return RolloutPlan(forced_batch, use_async and forced_batch >= min_async, reason="forced")
    if timings is None:
        size = forced_batch or auto_batch_size(n_episodes, cpu_count)
        mode = size > 1 if use_async is None else (use_async and size >= min_async)
        return RolloutPlan(size, mode, reason="default (no measurement)")

    candidates: list[tuple[float, int, bool]] = []
    sizes = [forced_batch] if forced_batch else range(1, min(n_episodes, MAX_BATCH_SIZE) + 1)
    async_cap = max(2, cpu_count)  # more workers than cores only queue behind each other
    for size in sizes:
        for mode in (False, True) if use_async is None else (use_async,):
            if mode and (size < min_async or (size > async_cap and not forced_batch)):
                continue
            cost = estimate_s(timings, n_episodes, n_tasks, size, mode, cpu_count)
            candidates.append((cost, size, mode))
    if not candidates:  # use_async forced with a single env: LeRobot falls back to in-process
        size = forced_batch or 1
        return RolloutPlan(size, False, reason="one env runs in-process")
    # Ties go to fewer environments, then to in-process.
    cost, size, mode = min(candidates, key=lambda c: (round(c[0], 6), c[1], c[2]))
    return RolloutPlan(size, mode, estimated_s=cost, reason="measured")
