"""Where a loop's actions come from: a teleoperator, or a policy in control.

Both become one callable `(observation, task) -> action` with a `reset` for episode starts, so
the loops do not care which drives the robot. A policy gets the observation as a batch of one in
the layout LeRobot policies read (images float32 channels-first in [0, 1]) and its answer is
brought back to a float32 vector, whatever framework or device it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from rlctl.application.ports.policy import Policy
from rlctl.application.ports.teleoperator import Teleoperator
from rlctl.domain.env_observation import to_policy_observation
from rlctl.domain.errors import InvalidInput


class ActionSource(Protocol):
    def reset(self) -> None: ...

    def __call__(self, observation: Mapping[str, Any], task: str) -> np.ndarray: ...


class TeleopSource:
    def __init__(self, teleop: Teleoperator) -> None:
        self._teleop = teleop

    def reset(self) -> None:
        self._teleop.reset()

    def __call__(self, observation: Mapping[str, Any], task: str) -> np.ndarray:
        return np.asarray(self._teleop.get_action(observation), dtype=np.float32)


class PolicySource:
    def __init__(self, policy: Policy, observation_keys: list[str]) -> None:
        self._policy = policy
        self._keys = observation_keys

    def reset(self) -> None:
        self._policy.reset()

    def __call__(self, observation: Mapping[str, Any], task: str) -> np.ndarray:
        batch: dict[str, Any] = to_policy_observation(
            {key: np.asarray(observation[key])[None] for key in self._keys}
        )
        batch["task"] = [task]
        action = np.asarray(self._policy.select_action(batch))
        if action.ndim != 2 or action.shape[0] != 1:
            raise InvalidInput(
                f"the policy returned actions of shape {action.shape}; expected (1, action_dim)",
                where="policy.select_action",
            )
        first: np.ndarray = action[0].astype(np.float32, copy=False)
        return first
