"""Meta-World's scripted experts as a teleoperator for the sim robot.

The expert reads the env's full 39-value state (`observation.environment_state`), which a
Meta-World sim robot observes whatever its obs_type: with the default pixels the dataset records
the camera and the hand position while the expert acts on the full state (it is recorded too
only with `--robot.env.obs_type=state`). It picks the expert for the task text the sim robot
reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlctl.adapters.sim.envs.metaworld_env import ACTION_DIM
from rlctl.adapters.sim.metaworld_expert import ENV_STATE_KEY, MetaWorldExpertPolicy
from rlctl.adapters.teleop.config import MetaWorldExpertConfig
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec


class MetaWorldExpertTeleop:
    def __init__(self, expert: MetaWorldExpertPolicy | None = None) -> None:
        self._expert = expert
        self._connected = False

    @property
    def teleop_type(self) -> str:
        return "metaworld_expert"

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: FeatureSpec(ACTION_KEY, "float32", (ACTION_DIM,))}

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        if self._expert is None:
            self._expert = MetaWorldExpertPolicy()
        self._connected = True

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        if self._expert is None:
            raise InvalidInput("the expert is not connected", where=self.teleop_type)
        if ENV_STATE_KEY not in observation:
            raise InvalidInput(
                f"the Meta-World expert needs {ENV_STATE_KEY}",
                where=self.teleop_type,
                hint="it acts in Meta-World only: --robot.type=sim --robot.env.type=metaworld",
            )
        batch = {
            ENV_STATE_KEY: np.asarray(observation[ENV_STATE_KEY])[None],
            "task": [str(observation.get("task", ""))],
        }
        try:
            return self._expert.select_action(batch)[0]
        except InvalidInput as error:
            if error.where != "metaworld expert":
                raise
            raise InvalidInput(
                error.message,
                where="teleop.type=metaworld_expert",
                hint="name the robot's Meta-World task: --teleop.task=NAME "
                "(e.g. --teleop.task=push-v3 with --robot.env.task=push-v3)",
            ) from error

    def disconnect(self) -> None:
        self._connected = False


def metaworld_expert(
    config: MetaWorldExpertConfig, *, calibration_store: CalibrationStore | None = None
) -> MetaWorldExpertTeleop:
    tasks = [name.strip() for name in (config.task or "").split(",") if name.strip()] or None
    return MetaWorldExpertTeleop(MetaWorldExpertPolicy(tasks) if tasks else None)
