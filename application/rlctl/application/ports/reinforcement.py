"""What HIL-SERL's actor and learner need from the world, in domain terms.

The learner (`rlctl rl learn`) listens for actors (`LearnerEndpoint`), trains a soft actor-critic
(`SACTrainer`, built by a `SACTrainerFactory` once the policy's features are known) from the replay
(`ReplayStore` keeps it across restarts). The actor (`rlctl rl act`) talks to the learner
(`LearnerLink`), acts with the policy it gets from it (`ActingPolicy`), in an `Interaction` (a
robot or a simulated one, every action through the robot's safety guard), with its reward from a
`RewardSource` (the env's by default; a reward classifier later) and a person's corrections from
an `InterventionSource`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs
import numpy as np

from rlctl.domain.errors import RlctlError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.rl.replay import ReplayBuffer, TransitionBatch

Weights = Mapping[str, np.ndarray]
Stats = Mapping[str, Mapping[str, np.ndarray]]


class LearnerUnavailable(RlctlError):
    """The learner cannot be reached (not started, restarting, the network down)."""


class LearnerBusy(LearnerUnavailable):
    """The learner answered but refused for now (its queue of pushed transitions is full, or
    it has as many calls in flight as it admits): the same call, sent again a little later,
    succeeds. Nothing was taken from the refused call."""


@attrs.frozen
class ActorHello:
    """What an actor tells the learner first: its features, its robot's action bounds, and the
    ranges of the observations the robot knows them for (feature -> (low, high))."""

    features: Mapping[str, FeatureSpec]
    action_low: np.ndarray | None = attrs.field(default=None, eq=False)
    action_high: np.ndarray | None = attrs.field(default=None, eq=False)
    observation_bounds: Mapping[str, tuple[np.ndarray, np.ndarray]] = attrs.field(
        factory=dict, eq=False
    )


@attrs.frozen
class LearnerDescription:
    """The policy the learner trains: its config, its normalisation statistics, its version."""

    config: PolicyConfig
    stats: Stats = attrs.field(eq=False)
    parameters_version: int = 0


@attrs.frozen
class Pushed:
    """One batch an actor pushed, and its episode report when it ended one."""

    batch: TransitionBatch | None
    report: Mapping[str, float] | None = None


class LearnerEndpoint(Protocol):
    """The learner's side of the wire."""

    def start(
        self,
        describe: Callable[[ActorHello], LearnerDescription],
        check: Callable[[TransitionBatch], None],
    ) -> str:
        """Listen in the background; `describe` answers an actor's hello, `check` refuses a
        batch that does not fit (raising `InvalidInput`) before it is queued. Returns the
        address."""
        ...

    def take(self) -> list[Pushed]:
        """Everything pushed since the last call (without waiting)."""
        ...

    def publish(self, version: int, weights: Weights) -> None:
        """The parameters actors fetch from now on."""
        ...

    def stop(self) -> None: ...


class SACTrainer(Protocol):
    """Soft actor-critic on a policy: one update per call, its weights, its checkpoints."""

    @property
    def description(self) -> LearnerDescription: ...

    @property
    def optimization_step(self) -> int: ...

    def update(self, batches: Iterator[TransitionBatch]) -> dict[str, float]: ...

    def weights(self) -> dict[str, np.ndarray]: ...

    def save(self, folder: Path, interaction_step: int) -> None:
        """The policy (LeRobot's `pretrained_model/`), the critics and temperature
        (`algorithm/`), the optimisers and the step (`training_state/`)."""
        ...


class SACTrainerFactory(Protocol):
    def create(self, hello: ActorHello | None) -> SACTrainer:
        """A trainer for the policy the settings describe, its features from `hello` (or from
        the checkpoint or the demonstrations, when they fix them)."""
        ...

    def resume(self, folder: Path) -> tuple[SACTrainer, int]:
        """The trainer saved in `folder`, and the interaction step it had reached."""
        ...


class ReplayStore(Protocol):
    def save(self, folder: Path, buffer: ReplayBuffer) -> None: ...

    def load(self, folder: Path, capacity: int) -> ReplayBuffer | None:
        """The buffer saved in `folder`; None when there is none."""
        ...


class LearnerLink(Protocol):
    """The actor's side of the wire; each call raises `LearnerUnavailable` when the learner
    cannot be reached, `LearnerBusy` when it refused the call for now."""

    def describe(self, hello: ActorHello) -> LearnerDescription: ...

    def push(self, batch: TransitionBatch | None, report: Mapping[str, float] | None) -> int:
        """Send transitions (and an episode report); returns the learner's parameters version."""
        ...

    def fetch(self, have_version: int) -> tuple[int, Weights | None]:
        """The newest version, and its weights when newer than `have_version`."""
        ...

    def close(self) -> None: ...


class ActingPolicy(Protocol):
    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """One raw action `(action_dim,)` for one raw observation."""
        ...

    def load_weights(self, weights: Weights) -> None: ...


class ActingPolicyFactory(Protocol):
    def create(self, description: LearnerDescription) -> ActingPolicy: ...


@attrs.frozen
class InteractionStep:
    observation: Mapping[str, Any]
    # What the robot actually did: the guard's output (the held command when it refused).
    executed_action: np.ndarray
    # The env's reward (None: the robot has none; a `RewardSource` must say).
    reward: float | None
    terminated: bool
    truncated: bool
    info: Mapping[str, Any] = attrs.field(factory=dict)


class Interaction(Protocol):
    """A robot (or a simulated one) the actor acts on; every action passes its safety guard."""

    @property
    def features(self) -> Mapping[str, FeatureSpec]: ...

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray] | None: ...

    def observation_bounds(self) -> Mapping[str, tuple[np.ndarray, np.ndarray]]:
        """(low, high) of the observations whose range the robot knows (a simulated arm's joint
        ranges), by feature; the others are left out."""
        ...

    def reset(self) -> Mapping[str, Any]: ...

    def step(self, action: np.ndarray) -> InteractionStep: ...

    def hold(self) -> None:
        """Keep still: the arm holds its last safe command (a simulation does not step)."""
        ...

    def close(self) -> None: ...


class RewardSource(Protocol):
    """Reward and success of a step (the env's by default; a trained classifier later)."""

    def judge(self, step: InteractionStep) -> tuple[float, bool]:
        """(reward, success: the episode ends as done)."""
        ...


class InterventionSource(Protocol):
    """A person's corrections: the action to execute instead of the policy's, or None."""

    def intervene(
        self, observation: Mapping[str, Any], proposed: np.ndarray
    ) -> np.ndarray | None: ...

    def reset(self) -> None: ...
