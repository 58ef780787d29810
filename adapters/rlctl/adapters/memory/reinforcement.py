"""In-process stand-ins for the actor/learner ports: a wire without a network (that can be cut),
a scripted one-dimensional robot, scripted interventions, a replay store in a dict, and a SAC
trainer that counts its steps."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from rlctl.application.ports.reinforcement import (
    ActorHello,
    InteractionStep,
    LearnerDescription,
    LearnerUnavailable,
    Pushed,
)
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec, typed_feature
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.rl.replay import ReplayBuffer, TransitionBatch


class InMemoryLearnerWire:
    """Both ends in one process: `endpoint` for the learner, `link` for the actor. `down`
    makes every call of the link fail as an unreachable learner would."""

    def __init__(self) -> None:
        self.endpoint = InMemoryLearnerEndpoint(self)
        self.link = InMemoryLearnerLink(self)
        self.down = False
        self.lock = threading.Lock()


class InMemoryLearnerEndpoint:
    def __init__(self, wire: InMemoryLearnerWire) -> None:
        self._wire = wire
        self.describe: Callable[[ActorHello], LearnerDescription] | None = None
        self.check: Callable[[TransitionBatch], None] | None = None
        self.queue: list[Pushed] = []
        self.version = 0
        self.weights: Mapping[str, np.ndarray] | None = None
        self.stopped = False

    def start(
        self,
        describe: Callable[[ActorHello], LearnerDescription],
        check: Callable[[TransitionBatch], None],
    ) -> str:
        self.describe, self.check = describe, check
        return "memory"

    def take(self) -> list[Pushed]:
        with self._wire.lock:
            out, self.queue = self.queue, []
        return out

    def publish(self, version: int, weights: Mapping[str, np.ndarray]) -> None:
        with self._wire.lock:
            self.version, self.weights = version, dict(weights)

    def stop(self) -> None:
        self.stopped = True


class InMemoryLearnerLink:
    def __init__(self, wire: InMemoryLearnerWire) -> None:
        self._wire = wire
        self.pushed: list[Pushed] = []

    def _endpoint(self) -> InMemoryLearnerEndpoint:
        if self._wire.down or self._wire.endpoint.describe is None:
            raise LearnerUnavailable("the learner is away", where="memory")
        return self._wire.endpoint

    def describe(self, hello: ActorHello) -> LearnerDescription:
        endpoint = self._endpoint()
        assert endpoint.describe is not None
        return endpoint.describe(hello)

    def push(self, batch: TransitionBatch | None, report: Mapping[str, float] | None) -> int:
        endpoint = self._endpoint()
        if batch is not None and endpoint.check is not None:
            endpoint.check(batch)
        pushed = Pushed(batch, dict(report) if report is not None else None)
        with self._wire.lock:
            endpoint.queue.append(pushed)
        self.pushed.append(pushed)
        return endpoint.version

    def fetch(self, have_version: int) -> tuple[int, Mapping[str, np.ndarray] | None]:
        endpoint = self._endpoint()
        with self._wire.lock:
            if endpoint.version == have_version:
                return endpoint.version, None
            return endpoint.version, endpoint.weights

    def close(self) -> None:
        return None


class LineInteraction:
    """A point on a line: the action moves it, the reward is minus its distance to 0, an
    episode lasts `length` steps (truncated). `holds` counts the times the actor held still."""

    def __init__(self, length: int = 5, start: float = 1.0) -> None:
        self.length = length
        self.start = start
        self.position = start
        self.t = 0
        self.holds = 0
        self.actions: list[np.ndarray] = []
        self.closed = False

    @property
    def features(self) -> Mapping[str, FeatureSpec]:
        return {
            "observation.state": FeatureSpec("observation.state", "float32", (1,)),
            "action": FeatureSpec("action", "float32", (1,)),
        }

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        return np.array([-1.0]), np.array([1.0])

    def observation_bounds(self) -> Mapping[str, tuple[np.ndarray, np.ndarray]]:
        return {}  # the point may go anywhere on its line

    def reset(self) -> Mapping[str, Any]:
        self.position, self.t = self.start, 0
        return {"observation.state": np.array([self.position], dtype=np.float32)}

    def step(self, action: np.ndarray) -> InteractionStep:
        # The guard of a real robot: finite and inside [-1, 1], else held at 0.
        value = float(np.asarray(action).reshape(-1)[0])
        sent = np.clip(value, -1.0, 1.0) if np.isfinite(value) else 0.0
        self.actions.append(np.array([sent], dtype=np.float32))
        self.position += sent
        self.t += 1
        return InteractionStep(
            observation={"observation.state": np.array([self.position], dtype=np.float32)},
            executed_action=np.array([sent], dtype=np.float32),
            reward=-abs(self.position),
            terminated=False,
            truncated=self.t >= self.length,
            info={"is_success": abs(self.position) < 1e-6},
        )

    def hold(self) -> None:
        self.holds += 1

    def close(self) -> None:
        self.closed = True


class ScriptedIntervention:
    """A person who takes over at the given ticks of each episode with `action`."""

    def __init__(self, ticks: set[int], action: float = -1.0) -> None:
        self.ticks = ticks
        self.action = action
        self._t = 0

    def intervene(self, observation: Mapping[str, Any], proposed: np.ndarray) -> np.ndarray | None:
        t, self._t = self._t, self._t + 1
        return np.array([self.action], dtype=np.float32) if t in self.ticks else None

    def reset(self) -> None:
        self._t = 0


class ConstantActingPolicy:
    """Acts `value` whatever it sees; `loaded` lists the weights it was given."""

    def __init__(self, value: float = 0.0) -> None:
        self.value = value
        self.loaded: list[Mapping[str, np.ndarray]] = []

    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        return np.array([self.value], dtype=np.float32)

    def load_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        self.loaded.append(weights)


class ConstantActingPolicyFactory:
    def __init__(self, policy: ConstantActingPolicy | None = None) -> None:
        self.policy = policy or ConstantActingPolicy()
        self.descriptions: list[LearnerDescription] = []

    def create(self, description: LearnerDescription) -> ConstantActingPolicy:
        self.descriptions.append(description)
        return self.policy


class InMemoryReplayStore:
    def __init__(self) -> None:
        self.saved: dict[Path, dict[str, np.ndarray]] = {}

    def save(self, folder: Path, buffer: ReplayBuffer) -> None:
        self.saved[folder] = {k: v.copy() for k, v in buffer.arrays().items()}
        folder.mkdir(parents=True, exist_ok=True)

    def load(self, folder: Path, capacity: int) -> ReplayBuffer | None:
        arrays = self.saved.get(folder) or self.saved.get(folder.resolve())
        if arrays is None:
            for path, saved in self.saved.items():
                if path.resolve() == folder.resolve():
                    arrays = saved
        return None if arrays is None else ReplayBuffer.from_arrays(capacity, arrays)


@attrs.define
class CountingTrainer:
    """SAC without the maths: each update draws its batches and counts; its weights say the
    step they were taken at. Saved as a JSON file."""

    description: LearnerDescription
    optimization_step: int = 0
    batches_seen: list[int] = attrs.field(factory=list)

    def update(self, batches: Iterator[TransitionBatch]) -> dict[str, float]:
        batch = next(batches)
        self.batches_seen.append(len(batch))
        self.optimization_step += 1
        return {"loss_critic": 1.0 / self.optimization_step}

    def weights(self) -> dict[str, np.ndarray]:
        return {"policy.step": np.array([self.optimization_step], dtype=np.float32)}

    def save(self, folder: Path, interaction_step: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "trainer.json").write_text(
            json.dumps({"step": self.optimization_step, "interaction_step": interaction_step})
        )


class CountingTrainerFactory:
    def __init__(self) -> None:
        self.created: list[CountingTrainer] = []

    def create(self, hello: ActorHello | None) -> CountingTrainer:
        if hello is None:
            raise InvalidInput("no features", where="memory")
        state = hello.features["observation.state"]
        action = hello.features["action"]
        config = GaussianActorConfig(
            input_features={"observation.state": typed_feature("STATE", tuple(state.shape))},
            output_features={"action": typed_feature("ACTION", tuple(action.shape))},
        )
        trainer = CountingTrainer(LearnerDescription(config, {}))
        self.created.append(trainer)
        return trainer

    def resume(self, folder: Path) -> tuple[CountingTrainer, int]:
        data = json.loads((folder / "trainer.json").read_text())
        config = GaussianActorConfig(
            input_features={"observation.state": typed_feature("STATE", (1,))},
            output_features={"action": typed_feature("ACTION", (1,))},
        )
        trainer = CountingTrainer(LearnerDescription(config, {}), data["step"])
        self.created.append(trainer)
        return trainer, int(data["interaction_step"])


class ThresholdReward:
    """A stand-in for a success classifier: success (reward 1) once the observation's first
    value is within `tolerance` of 0, else reward 0."""

    def __init__(self, key: str = "observation.state", tolerance: float = 0.1) -> None:
        self.key = key
        self.tolerance = tolerance

    def judge(self, step: InteractionStep) -> tuple[float, bool]:
        value = float(np.asarray(step.observation[self.key]).reshape(-1)[0])
        success = abs(value) <= self.tolerance
        return (1.0 if success else 0.0), success
