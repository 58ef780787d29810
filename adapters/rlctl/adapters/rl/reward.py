"""The actor's reward sources, the env's (`EnvReward`, the default) or a success detector's (a
trained reward classifier: `ClassifierReward`), and its default intervention source, nobody
(`NoIntervention`; a robot's own teleoperation, gym-hil's, is read from its step's info)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlctl.application.ports.reinforcement import InteractionStep
from rlctl.application.ports.success import SuccessDetector
from rlctl.domain.errors import ConfigError


class EnvReward:
    """The simulator's reward; success is its `is_success` (ending the episode as done)."""

    def judge(self, step: InteractionStep) -> tuple[float, bool]:
        if step.reward is None:
            raise ConfigError(
                "this robot reports no reward, and the actor has no other reward source",
                where="--reward",
                hint="run on a simulated robot (--robot.type=sim), or plug in a reward "
                "classifier when one is available",
            )
        return float(step.reward), bool(step.info.get("is_success", False))


class NoIntervention:
    """Nobody takes over: every executed action is the policy's."""

    def intervene(self, observation: Mapping[str, Any], proposed: np.ndarray) -> np.ndarray | None:
        return None

    def reset(self) -> None:
        return None


class ClassifierReward:
    """Success told by a detector looking at the observation (LeRobot's reward classifier step):
    `success_reward` and the episode's end on success, 0 otherwise; the env's reward is not
    used."""

    def __init__(self, detector: SuccessDetector, success_reward: float = 1.0) -> None:
        self.detector = detector
        self.success_reward = float(success_reward)

    def judge(self, step: InteractionStep) -> tuple[float, bool]:
        success = bool(self.detector.is_success(step.observation))
        return (self.success_reward if success else 0.0), success


def classifier_reward(
    location: str, *, threshold: float = 0.5, success_reward: float = 1.0, device: str = "cpu"
) -> ClassifierReward:
    """`ClassifierReward` over the reward classifier saved at `location`."""
    from rlctl.adapters.policies.success_detector import ClassifierSuccessDetector

    detector = ClassifierSuccessDetector.load(location, threshold=threshold, device=device)
    return ClassifierReward(detector, success_reward=success_reward)
