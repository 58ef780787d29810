"""The actor's adapters: the policy it runs, the robot it acts on, its reward and interventions.

`RobotInteraction` drives any `Robot` (hardware, or `--robot.type=sim` around a registered env):
every action goes through `Robot.send_action`, i.e. the robot's safety guard, and what the guard
let through is the action recorded. Holding re-sends the guard's last safe command (hardware keeps
still; a simulated robot is simply not stepped). Cameras arrive as the policy reads them:
channels first, floats in [0, 1].

The default reward source and intervention source are in `reward`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.policies.gaussian_actor import GaussianActorPolicy
from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy
from rlctl.adapters.rl.sac import load_actor_weights
from rlctl.application.ports.reinforcement import InteractionStep, LearnerDescription
from rlctl.application.ports.robot import Robot
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec

log = structlog.get_logger(__name__)
IMAGE_PREFIX = "observation.image"


class GaussianActingPolicy:
    def __init__(self, policy: LoadedPolicy) -> None:
        if not isinstance(policy.model, GaussianActorPolicy):
            raise ConfigError(
                f"the learner trains {policy.config.type_name!r}; the actor runs gaussian_actor",
                where="policy.type",
            )
        self._policy = policy
        self._model = policy.model

    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        batch = {
            k: np.asarray(v)[None] for k, v in observation.items() if isinstance(v, np.ndarray)
        }
        return np.asarray(self._policy.select_action(batch)).reshape(-1)

    def load_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        load_actor_weights(self._model, weights)


class GaussianActingPolicyFactory:
    def __init__(self, device: str | None = None) -> None:
        self._device = device

    def create(self, description: LearnerDescription) -> GaussianActingPolicy:
        policy = create_policy(description.config, description.stats, device=self._device)
        return GaussianActingPolicy(policy)


class RobotInteraction:
    def __init__(self, robot: Robot) -> None:
        self._robot = robot
        if not robot.is_connected:
            robot.connect()
        self._features: dict[str, FeatureSpec] | None = None
        self._last_sent: np.ndarray | None = None

    @property
    def features(self) -> Mapping[str, FeatureSpec]:
        if self._features is None:
            features = dict(self._robot.observation_features)
            if not any(k.startswith("observation.") for k in features):
                # Envs that declare no features (a plain gym id): read them off an observation.
                self._robot.reset()
                for key, value in self._robot.get_observation().items():
                    array = np.asarray(value)
                    if key.startswith("observation.") and array.dtype.kind in "fiu":
                        dtype = "image" if array.ndim == 3 else "float32"
                        features[key] = FeatureSpec(key, dtype, tuple(array.shape))
            features.update(self._robot.action_features)
            self._features = features
        return self._features

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        guard = getattr(self._robot, "action_guard", None)
        limits = getattr(guard, "limits", None)
        if limits is None:
            return None
        return np.asarray(limits.low, dtype=np.float64), np.asarray(limits.high, dtype=np.float64)

    def observation_bounds(self) -> Mapping[str, tuple[np.ndarray, np.ndarray]]:
        """What the robot knows of its observations' ranges (a simulated robot: its env's
        observation space), for the features the actor observes."""
        known = getattr(self._robot, "observation_bounds", None) or {}
        features = self.features
        out = {}
        for key, (low, high) in known.items():
            feature = features.get(key)
            if feature is not None and np.shape(low) == tuple(feature.shape):
                out[key] = (np.asarray(low, np.float64), np.asarray(high, np.float64))
        return out

    def reset(self) -> Mapping[str, Any]:
        self._robot.reset()
        self._last_sent = None
        return self._observation()

    def step(self, action: np.ndarray) -> InteractionStep:
        simulated = hasattr(self._robot, "last_step")
        before = getattr(self._robot, "last_step", None)
        sent = np.asarray(self._robot.send_action(np.asarray(action, dtype=np.float32)))
        self._last_sent = sent
        observation = self._observation()
        last = getattr(self._robot, "last_step", None)
        reward = terminated = truncated = None
        info: Mapping[str, Any] = {}
        if simulated and (last is None or last is before):
            # The guard had nothing safe to send yet: the scene waited, nothing was earned.
            reward = 0.0
        elif last is not None:
            reward = float(np.asarray(last.reward).reshape(-1)[0])
            terminated = bool(np.asarray(last.terminated).reshape(-1)[0])
            truncated = bool(np.asarray(last.truncated).reshape(-1)[0])
            info = _first_env(last.info)
        over = self._robot.episode_over
        return InteractionStep(
            observation=observation,
            executed_action=sent.astype(np.float32).reshape(-1),
            reward=reward,
            terminated=bool(terminated) if terminated is not None else False,
            truncated=bool(truncated) if truncated is not None else (over and not terminated),
            info=info,
        )

    def hold(self) -> None:
        if self._last_sent is not None and self._robot.realtime:
            # Hardware: the guard's last safe command again (the arm keeps still).
            self._robot.send_action(self._last_sent)

    def close(self) -> None:
        self._robot.disconnect()

    def _observation(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in self._robot.get_observation().items():
            if not key.startswith("observation."):
                continue
            array = np.asarray(value)
            if array.ndim == 3 and key.startswith(IMAGE_PREFIX):
                # (H, W, C) uint8 as the robot gives it -> (C, H, W) floats in [0, 1].
                array = np.transpose(array, (2, 0, 1)).astype(np.float32) / 255.0
            else:
                array = array.astype(np.float32)
            out[key] = array
        return out


def _first_env(info: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in info.items():
        array = np.asarray(value) if not isinstance(value, Mapping) else None
        if array is not None and array.ndim >= 1 and array.shape[0] >= 1:
            out[key] = array[0].item() if array[0].ndim == 0 else array[0]
    return out
