"""Simulators, seen by the evaluation use case as batches of environments stepped together.

A `Simulation` is one configured env type (PushT, ALOHA, a Meta-World suite …). It names its
tasks, grouped in suites as LeRobot does (`{suite: {task_id: envs}}`), and creates one
`VectorSimulator` per task: `num_envs` copies of the task's environment stepped in lock-step,
in-process or in worker processes. Creating them starts nothing; workers start on `start()`
(in the background) or on the first `reset`, so a suite of fifty tasks has at most two tasks'
workers alive: the running one's and the next one's, started while it runs (with
`max_parallel_tasks = N`, the N running ones' and the next one's). Without that prefetch (off
for envs that render on a GPU, see `EvalSettings.prefetch_next_task`), one task's (N).
A simulation whose envs were built already (a plain gymnasium vector env from an env config's
own `create_envs`) has nothing left to start.

Observations are plain mappings of batched numpy arrays under the simulator's raw keys (nested
dicts flattened with "/": `pixels/top`); the env's `feature_map` says which policy key each one
becomes (see `rlctl.domain.env_observation`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from rlctl.domain.errors import RlctlError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.processors import ProcessorPipeline

if TYPE_CHECKING:
    # Only for annotations: reading env configs (`rlctl eval --help`) must not import numpy.
    import numpy as np

Observation = dict[str, "np.ndarray"]


class SimulationError(RlctlError):
    """A simulator failed: its package is missing, a worker crashed, or a step raised."""


@attrs.frozen
class SimStep:
    """One vectorised step; every array has the batch as its first axis.

    `info` is the vector env's info: `is_success` per env, and for an env that just ended
    possibly `final_info` with its terminal values (see `rlctl.domain.eval_metrics`).
    """

    observation: Observation
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class SimTask:
    suite: str
    task_id: int
    name: str = ""


@attrs.frozen
class SimSpec:
    """What a simulation offers, read once per suite without stepping it."""

    # Raw observation features by raw key, plus "action".
    features: Mapping[str, FeatureSpec]
    # Raw key → policy key (`agent_pos` → `observation.state`).
    feature_map: Mapping[str, str]
    fps: int
    max_episode_steps: int
    action_low: np.ndarray
    action_high: np.ndarray
    # How many of its tasks may run at once (LeRobot's `env.max_parallel_tasks`).
    max_parallel_tasks: int = 1
    # Its envs render through a GL context on a GPU (EGL on an NVIDIA device): each live env
    # holds one, so by default the next task's envs are not started ahead.
    renders_on_gpu: bool = False
    # (low, high) of the raw observations whose range the env's observation space bounds
    # (finite float boxes: a simulated arm's joint ranges), by raw key.
    observation_bounds: Mapping[str, tuple[np.ndarray, np.ndarray]] = attrs.field(
        factory=dict, eq=False
    )

    @property
    def action_dim(self) -> int:
        return int(self.action_low.shape[-1])


@attrs.frozen
class SimProbe:
    """One environment built and stepped in-process, to measure it before choosing a plan."""

    observation: Observation  # batched, batch of one
    task: str
    start_s: float  # building the env, imports included: what each worker process would pay
    step_s: float  # one step, averaged over a few


class VectorSimulator(Protocol):
    """`num_envs` environments of one task, stepped together."""

    @property
    def num_envs(self) -> int: ...

    @property
    def max_episode_steps(self) -> int: ...

    def start(self) -> None:
        """Begin starting the workers in the background and return at once (no-op in-process)."""
        ...

    def reset(self, seeds: Sequence[int] | None = None) -> Observation:
        """Start new episodes, one seed per env (None: unseeded)."""
        ...

    def step(self, actions: np.ndarray) -> SimStep:
        """Apply one (num_envs, action_dim) action batch. An env whose episode ended stays put."""
        ...

    def task_descriptions(self) -> list[str]:
        """The task text of each env ("" when the env has none)."""
        ...

    def render(self, n: int) -> np.ndarray | None:
        """RGB frames (n, H, W, 3) uint8 of the first `n` envs, or None when they cannot render."""
        ...

    def close(self) -> None:
        """Stop the workers; safe to call twice, and after a failure."""
        ...


class Simulation(Protocol):
    """One configured env type: its tasks, its features, and factories for vector simulators."""

    def spec(self) -> SimSpec: ...

    def tasks(self) -> list[SimTask]: ...

    def probe(self) -> SimProbe:
        """Build one env of the first task in-process, reset it, and time a few steps."""
        ...

    def create(
        self, n_envs: int, use_async: bool, worker_cores: int | None = None
    ) -> Mapping[str, Mapping[int, VectorSimulator]]:
        """`{suite: {task_id: simulator}}` for every task; nothing is started yet.

        `use_async`: each task's envs in worker processes (even a single env), else in this
        process. `worker_cores`: the cores one task's worker processes may use (None: every
        core); a task's `n_envs` are sharded over at most that many workers.
        """
        ...

    def processors(
        self, policy: PolicyConfig | None = None
    ) -> tuple[ProcessorPipeline, ProcessorPipeline]:
        """The (pre, post) processor pipelines between the env and `policy`: the env's own
        (empty, identity, for most envs), or those `policy`'s type brings for this env type
        (X-VLA on LIBERO), found through the policy type's registered implementation."""
        ...
