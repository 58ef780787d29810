"""A scripted `Simulation` for tests and dry runs: episodes whose outcome follows from the seed.

Each sub-env plays a `FakeEpisode` chosen by `script(seed, task)`: it lasts `length` steps
(or is truncated at the step limit), pays `rewards[t]` at step t, and reports success on its
last step when `success` is set. After its episode ends a sub-env keeps answering with
`after_end_reward` and success, on purpose: nothing it says then may be counted.

Workers are simulated: `live_workers` counts the sub-envs of started async simulators, so a
test can check that a suite never has more than two tasks' workers alive (N + 1 with N tasks
run at once; one task's, N, without prefetch); `running` counts the tasks between their first
reset and their close. The record is kept under a lock: tasks may run in several threads at
once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs
import numpy as np

from rlctl.application.ports.simulation import (
    Observation,
    SimProbe,
    SimSpec,
    SimStep,
    SimTask,
    SimulationError,
)
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.processors import ProcessorPipeline


def _rewards(value: Iterable[float]) -> tuple[float, ...]:
    return tuple(value)


@attrs.frozen
class FakeEpisode:
    length: int
    rewards: tuple[float, ...] = attrs.field(converter=_rewards, default=())
    success: bool = False

    def reward_at(self, t: int) -> float:
        return self.rewards[t] if t < len(self.rewards) else 0.0


def default_script(seed: int | None, task: SimTask) -> FakeEpisode:
    """Length 1..7, success for seeds divisible by 3, reward t/10 at step t."""
    s = 0 if seed is None else seed
    length = 1 + (s + task.task_id) % 7
    return FakeEpisode(length, [t / 10 for t in range(length)], success=(s % 3 == 0))


@attrs.define
class FakeRecord:
    """What every fake simulator was asked to do, for assertions."""

    resets: list[list[int | None]] = attrs.field(factory=list)
    steps: int = 0
    created: list[tuple[str, int, int, bool]] = attrs.field(factory=list)
    started: list[tuple[str, int]] = attrs.field(factory=list)
    closed: list[tuple[str, int]] = attrs.field(factory=list)
    live_workers: int = 0
    max_live_workers: int = 0
    running: int = 0
    max_running: int = 0
    worker_cores: list[int | None] = attrs.field(factory=list)
    probes: int = 0
    lock: threading.Lock = attrs.field(factory=threading.Lock, eq=False, repr=False)


class FakeVectorSimulator:
    def __init__(
        self,
        owner: FakeSimulation,
        task: SimTask,
        num_envs: int,
        use_async: bool,
    ) -> None:
        self._owner = owner
        self._task = task
        self._num_envs = num_envs
        self._async = use_async
        self._started = False
        self._running = False
        self._closed = False
        self._episodes: list[FakeEpisode] = []
        self._t = np.zeros(num_envs, dtype=np.int64)
        self._ended = np.zeros(num_envs, dtype=bool)
        self._seeds: list[int | None] = [None] * num_envs

    @property
    def num_envs(self) -> int:
        return self._num_envs

    @property
    def max_episode_steps(self) -> int:
        return self._owner.max_episode_steps

    @property
    def is_started(self) -> bool:
        return self._started

    def start(self) -> None:
        record = self._owner.record
        with record.lock:
            if self._started or self._closed:
                return
            self._started = True
            record.started.append((self._task.suite, self._task.task_id))
            if self._async:
                record.live_workers += self._num_envs
                record.max_live_workers = max(record.max_live_workers, record.live_workers)

    def reset(self, seeds: Sequence[int] | None = None) -> Observation:
        self._check_open()
        self.start()
        seeds_list: list[int | None] = list(seeds) if seeds is not None else [None] * self.num_envs
        record = self._owner.record
        with record.lock:
            record.resets.append(seeds_list)
            if not self._running:
                self._running = True
                record.running += 1
                record.max_running = max(record.max_running, record.running)
        self._seeds = seeds_list
        self._episodes = [self._owner.script(s, self._task) for s in seeds_list]
        self._t[:] = 0
        self._ended[:] = False
        return self._observation()

    def step(self, actions: np.ndarray) -> SimStep:
        self._check_open()
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs, self._owner.action_dim):
            raise SimulationError(
                f"expected actions of shape {(self.num_envs, self._owner.action_dim)}, "
                f"got {actions.shape}"
            )
        record = self._owner.record
        with record.lock:
            record.steps += 1
            steps = record.steps
        if self._owner.step_sleep_s:
            time.sleep(self._owner.step_sleep_s)  # lets tasks in other threads interleave
        if self._owner.fail_at_step is not None and steps >= self._owner.fail_at_step:
            raise SimulationError(
                "scripted crash", where=f"{self._task.suite}/{self._task.task_id}"
            )
        reward = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        success = np.zeros(self.num_envs, dtype=bool)
        for i, episode in enumerate(self._episodes):
            if self._ended[i]:
                reward[i] = self._owner.after_end_reward
                success[i] = True
                continue
            t = int(self._t[i])
            reward[i] = episode.reward_at(t) + self._owner.action_reward * float(actions[i, 0])
            self._t[i] = t + 1
            if t + 1 >= episode.length:
                terminated[i] = True
                success[i] = episode.success
                self._ended[i] = True
            elif t + 1 >= self.max_episode_steps:
                truncated[i] = True
                self._ended[i] = True
        info = {"is_success": success, "_is_success": np.ones(self.num_envs, dtype=bool)}
        return SimStep(self._observation(), reward, terminated, truncated, info)

    def task_descriptions(self) -> list[str]:
        return [f"fake task {self._task.suite}/{self._task.task_id}"] * self.num_envs

    def render(self, n: int) -> np.ndarray | None:
        if not self._owner.renders:
            return None
        frames = np.zeros((n, 16, 16, 3), dtype=np.uint8)
        frames[..., 0] = np.minimum(self._t[:n], 255)[:, None, None]
        return frames

    def close(self) -> None:
        record = self._owner.record
        with record.lock:
            if self._closed:
                return
            self._closed = True
            record.closed.append((self._task.suite, self._task.task_id))
            if self._started and self._async:
                record.live_workers -= self._num_envs
            if self._running:
                record.running -= 1

    def _check_open(self) -> None:
        if self._closed:
            raise SimulationError("the simulator is closed", where=self._task.suite)

    def _observation(self) -> Observation:
        seeds = np.array([-1 if s is None else s for s in self._seeds], dtype=np.float64)
        state = np.stack([seeds, self._t.astype(np.float64)], axis=1)
        return {"agent_pos": state}


class FakeSimulation:
    """`Simulation` over scripted episodes. `suites` maps a suite to its task names."""

    def __init__(
        self,
        suites: Mapping[str, Sequence[str]] | None = None,
        *,
        script: Callable[[int | None, SimTask], FakeEpisode] = default_script,
        max_episode_steps: int = 20,
        action_dim: int = 2,
        fps: int = 10,
        renders: bool = True,
        fail_at_step: int | None = None,
        after_end_reward: float = 100.0,
        step_s: float = 1e-3,
        start_s: float = 0.5,
        max_parallel_tasks: int = 1,
        step_sleep_s: float = 0.0,
        action_reward: float = 0.0,
        renders_on_gpu: bool = False,
    ) -> None:
        self.suites = {k: list(v) for k, v in (suites or {"fake": ["task"]}).items()}
        self.script = script
        self.max_episode_steps = max_episode_steps
        self.action_dim = action_dim
        self.fps = fps
        self.renders = renders
        self.fail_at_step = fail_at_step
        self.after_end_reward = after_end_reward
        self.record = FakeRecord()
        self.simulators: list[FakeVectorSimulator] = []
        self._step_s = step_s
        self._start_s = start_s
        self.max_parallel_tasks = max_parallel_tasks
        self.step_sleep_s = step_sleep_s
        # Added to each step's reward times the env's first action component, so that what the
        # policy does shows in the results (0: it does not).
        self.action_reward = action_reward
        # What `spec()` says: the run's prefetch default follows it.
        self.renders_on_gpu = renders_on_gpu

    def spec(self) -> SimSpec:
        return SimSpec(
            features={
                "agent_pos": FeatureSpec("agent_pos", "float32", (2,)),
                "action": FeatureSpec("action", "float32", (self.action_dim,)),
            },
            feature_map={"agent_pos": "observation.state"},
            fps=self.fps,
            max_episode_steps=self.max_episode_steps,
            action_low=-np.ones(self.action_dim, dtype=np.float32),
            action_high=np.ones(self.action_dim, dtype=np.float32),
            max_parallel_tasks=self.max_parallel_tasks,
            renders_on_gpu=self.renders_on_gpu,
        )

    def tasks(self) -> list[SimTask]:
        return [
            SimTask(suite, task_id, name)
            for suite, names in self.suites.items()
            for task_id, name in enumerate(names)
        ]

    def probe(self) -> SimProbe:
        self.record.probes += 1
        return SimProbe(
            observation={"agent_pos": np.zeros((1, 2))},
            task="fake task",
            start_s=self._start_s,
            step_s=self._step_s,
        )

    def create(
        self, n_envs: int, use_async: bool, worker_cores: int | None = None
    ) -> dict[str, dict[int, FakeVectorSimulator]]:
        self.record.worker_cores.append(worker_cores)
        out: dict[str, dict[int, FakeVectorSimulator]] = {}
        for task in self.tasks():
            sim = FakeVectorSimulator(self, task, n_envs, use_async)
            self.simulators.append(sim)
            self.record.created.append((task.suite, task.task_id, n_envs, use_async))
            out.setdefault(task.suite, {})[task.task_id] = sim
        return out

    def processors(
        self, policy: PolicyConfig | None = None
    ) -> tuple[ProcessorPipeline, ProcessorPipeline]:
        return ProcessorPipeline(name="env_preprocessor"), ProcessorPipeline(
            name="env_postprocessor"
        )
