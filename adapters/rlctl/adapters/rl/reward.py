"""The actor's default sources: the env's reward and success (`EnvReward`; a reward classifier
will plug in as another `RewardSource`), and nobody intervening (`NoIntervention`; a teleoperator
or gamepad will plug in as another `InterventionSource`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlctl.application.ports.reinforcement import InteractionStep
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
