"""A scripted `Policy` and an in-memory `PolicyLoader`: policies without torch or files.

`ScriptedPolicy` answers every chunk from a function of the observation batch (a constant by
default) and records what it was given, so a use-case test can check the observations a loop
sends and the ticks it asks on; it keeps its chunks in the same `ChunkedActing` the real
policies use. `InMemoryPolicyLoader` hands out policies stored under a location, and builds
registered types with `for_simulation` like the real loader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rlctl.application.ports.policy import Policy
from rlctl.application.ports.simulation import Simulation
from rlctl.domain.acting import ChunkedActing, ConfigDescribed, Leftover
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec, typed_feature
from rlctl.domain.policies import PolicyConfig, RandomPolicyConfig
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig

Chunker = Callable[[Mapping[str, Any]], np.ndarray]


class ScriptedPolicy(ConfigDescribed[PolicyConfig]):
    """A policy whose chunks come from `chunker(batch) -> (batch, steps, action_dim)`."""

    def __init__(
        self,
        action_dim: int,
        *,
        chunk_size: int = 4,
        n_action_steps: int | None = None,
        chunker: Chunker | None = None,
        input_features: Mapping[str, FeatureSpec] | None = None,
        rtc: RTCConfig | None = None,
        rtc_delay: int = 0,
    ) -> None:
        steps = n_action_steps or chunk_size
        self._config: PolicyConfig = RandomPolicyConfig(
            chunk_size=chunk_size,
            n_action_steps=steps,
            input_features=dict(input_features or {}),
            output_features={"action": typed_feature("ACTION", (action_dim,))},
        )
        self._chunk_size = chunk_size
        self._action_dim = action_dim
        self._chunker = chunker
        # With `rtc`, it acts as a flow-matching policy's loop does (real-time chunking) and
        # records the committed actions each chunk was asked with; it does not follow them.
        self.rtc = rtc if rtc is not None and rtc.enabled else None
        self._acting = ChunkedActing.for_config(
            self._config, rtc=self.rtc, inference_delay=rtc_delay
        )
        # Every batch a chunk was predicted from (and what it was to follow), and the number
        # of select_action calls.
        self.predicted_from: list[Mapping[str, Any]] = []
        self.committed: list[CommittedActions | None] = []
        self.ticks = 0

    def predict_chunk(
        self,
        observation: Mapping[str, Any],
        noise: Any | None = None,
        *,
        committed: CommittedActions | None = None,
    ) -> ActionChunk:
        self.predicted_from.append(observation)
        self.committed.append(committed)
        if self._chunker is not None:
            return ActionChunk(np.asarray(self._chunker(observation), dtype=np.float32))
        batch = _batch_size(observation)
        return ActionChunk(np.zeros((batch, self._chunk_size, self._action_dim), np.float32))

    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        self.ticks += 1
        if not self._acting.reads_observation():
            return np.asarray(self._acting.next_action())
        action = self._acting.act(observation, self._predict)
        return np.asarray(action)

    def _predict(self, batch: Mapping[str, Any], left: Leftover | None = None) -> Any:
        committed = None
        if self.rtc is not None and left is not None:
            committed = left.committed(self.rtc)
        return self.predict_chunk(batch, committed=committed).actions

    def reset(self) -> None:
        self._acting.reset()


def _batch_size(observation: Mapping[str, Any]) -> int:
    for value in observation.values():
        shape = getattr(value, "shape", None)
        if shape:
            return int(shape[0])
    task = observation.get("task")
    return len(task) if isinstance(task, list | tuple) else 1


class InMemoryPolicyLoader:
    """Policies stored by location; untrained types built by a factory per type name."""

    def __init__(
        self,
        policies: Mapping[str, Policy] | None = None,
        factories: Mapping[str, Callable[[Simulation, int | None], Policy]] | None = None,
    ) -> None:
        self.policies: dict[str, Policy] = dict(policies or {})
        self.factories = dict(factories or {})
        self.loads: list[dict[str, Any]] = []

    def load(
        self,
        location: str | Path,
        *,
        device: str | None = None,
        rtc: RTCConfig | None = None,
        rtc_delay: int | None = None,
    ) -> Policy:
        """The policy stored at `location`, as it was stored; the settings asked with are
        recorded in `loads` for a test to check."""
        self.loads.append(
            {"location": str(location), "device": device, "rtc": rtc, "rtc_delay": rtc_delay}
        )
        try:
            return self.policies[str(location)]
        except KeyError:
            raise ConfigError(
                f"no policy stored at {location}",
                where=str(location),
                hint=f"stored: {', '.join(self.policies) or '(none)'}",
            ) from None

    def read_config(self, location: str | Path) -> PolicyConfig:
        return self.load(location).config

    def create_for_simulation(
        self, policy_type: str, simulation: Simulation, *, seed: int | None = None
    ) -> Policy:
        factory = self.factories.get(policy_type)
        if factory is None:
            raise ConfigError(
                f"unknown policy type {policy_type!r}",
                where="policy.type",
                hint=f"known here: {', '.join(self.factories) or '(none)'}",
            )
        return factory(simulation, seed)
