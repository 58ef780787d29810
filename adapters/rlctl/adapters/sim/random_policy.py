"""A `Policy` that acts uniformly at random inside the action bounds.

It exercises the whole evaluation path (chunks, queue, batching across envs) without a trained
model, and gives the floor every trained policy must beat.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rlctl.adapters.policies.implementations import PolicyImplementation
from rlctl.domain.acting import ChunkedActing, ConfigDescribed
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec, typed_feature
from rlctl.domain.policies import RandomPolicyConfig
from rlctl.domain.policies.rtc import CommittedActions

if TYPE_CHECKING:
    from rlctl.application.ports.simulation import Simulation


def _finite(bound: np.ndarray, fallback: float) -> np.ndarray:
    # Unbounded Box spaces (-inf, inf) are sampled in [-1, 1] instead.
    return np.where(np.isfinite(bound), bound, fallback).astype(np.float32)


class RandomPolicy(ConfigDescribed[RandomPolicyConfig], PolicyImplementation[RandomPolicyConfig]):
    config_class = RandomPolicyConfig

    def __init__(
        self,
        action_low: Any,
        action_high: Any,
        *,
        chunk_size: int = 10,
        n_action_steps: int = 10,
        seed: int | None = None,
        input_features: Mapping[str, FeatureSpec] | None = None,
    ) -> None:
        self._low = _finite(np.asarray(action_low, dtype=np.float64), -1.0)
        self._high = _finite(np.asarray(action_high, dtype=np.float64), 1.0)
        if self._low.shape != self._high.shape or self._low.ndim != 1:
            raise InvalidInput(
                f"action bounds must be two vectors of one length, got {self._low.shape} "
                f"and {self._high.shape}",
                where="random policy",
            )
        self._config = RandomPolicyConfig(
            chunk_size=chunk_size,
            n_action_steps=n_action_steps,
            seed=seed,
            input_features=dict(input_features or {}),
            output_features={"action": typed_feature("ACTION", shape=self._low.shape)},
        )
        self._rng = np.random.default_rng(seed)
        self._acting = ChunkedActing.for_config(self._config)

    @classmethod
    def for_simulation(
        cls, config: RandomPolicyConfig, simulation: Simulation, *, seed: int | None = None
    ) -> RandomPolicy:
        """Uniform actions in `simulation`'s action bounds; `config.seed` wins over `seed`."""
        spec = simulation.spec()
        return cls(
            spec.action_low,
            spec.action_high,
            chunk_size=config.chunk_size,
            n_action_steps=config.n_action_steps,
            seed=config.seed if config.seed is not None else seed,
        )

    def predict_chunk(
        self,
        observation: Mapping[str, Any],
        noise: Any | None = None,
        *,
        committed: CommittedActions | None = None,  # not flow matching: ignored
    ) -> ActionChunk:
        batch = _batch_size(observation)
        shape = (batch, self._config.chunk_size, self._low.shape[0])
        actions = self._rng.uniform(self._low, self._high, size=shape).astype(np.float32)
        return ActionChunk(actions)

    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        if not self._acting.reads_observation():
            return self._acting.next_action()
        return self._acting.act(observation, lambda batch: self.predict_chunk(batch).actions)

    def reset(self) -> None:
        self._acting.reset()


def _batch_size(observation: Mapping[str, Any]) -> int:
    for key, value in observation.items():
        shape = getattr(value, "shape", None)
        if key.startswith("observation") and shape is not None and len(shape) >= 1:
            return int(shape[0])
    task = observation.get("task")
    return len(task) if isinstance(task, list | tuple) else 1
