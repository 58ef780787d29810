"""Meta-World's scripted expert policies as a `Policy`: a source of good actions with no model.

The experts read Meta-World's full 39-value state, so the env must run with
`--env.obs_type=state` (which adds it as `observation.environment_state`). The task of each
env is recognised from its task text; `push-v3` and `push-back-v3` share theirs, so the tasks
being evaluated (`tasks`) settle which one is meant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rlctl.adapters.policies.implementations import PolicyImplementation
from rlctl.adapters.sim.envs.metaworld_env import ACTION_DIM, STATE_DIM, task_table
from rlctl.domain.acting import ConfigDescribed
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.env_observation import env_policy_features
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import MetaWorldExpertConfig
from rlctl.domain.policies.rtc import CommittedActions

if TYPE_CHECKING:
    from rlctl.application.ports.simulation import Simulation

ENV_STATE_KEY = "observation.environment_state"


class MetaWorldExpertPolicy(
    ConfigDescribed[MetaWorldExpertConfig], PolicyImplementation[MetaWorldExpertConfig]
):
    config_class = MetaWorldExpertConfig

    def __init__(self, tasks: Iterable[str] | None = None) -> None:
        import metaworld.policies as experts

        table = task_table()["tasks"]
        allowed = set(tasks) if tasks is not None else set(table)
        self._by_text: dict[str, list[str]] = {}
        for name, entry in table.items():
            if name in allowed:
                self._by_text.setdefault(entry["description"], []).append(name)
        self._experts = {
            name: getattr(experts, entry["expert"])()
            for name, entry in table.items()
            if name in allowed
        }
        self._config = MetaWorldExpertConfig(
            input_features={ENV_STATE_KEY: typed_feature("ENV", shape=(STATE_DIM,))},
            output_features={"action": typed_feature("ACTION", shape=(ACTION_DIM,))},
        )

    @classmethod
    def for_simulation(
        cls, config: MetaWorldExpertConfig, simulation: Simulation, *, seed: int | None = None
    ) -> MetaWorldExpertPolicy:
        """The experts of `simulation`'s tasks; it must observe Meta-World's full state."""
        spec = simulation.spec()
        provided = env_policy_features(spec.features, spec.feature_map).get(ENV_STATE_KEY)
        if provided is None or tuple(provided.shape) != (STATE_DIM,):
            raise ConfigError(
                f"the Meta-World expert acts on Meta-World's full state ({ENV_STATE_KEY}, "
                f"{STATE_DIM} values), which this env does not provide",
                where="policy.type=metaworld_expert",
                hint="run it with --env.type=metaworld --env.obs_type=state (videos still render)",
            )
        return cls([task.name for task in simulation.tasks()])

    def _task_of(self, text: str) -> str:
        names = self._by_text.get(text) or ([text] if text in self._experts else [])
        if len(names) != 1:
            raise InvalidInput(
                f"cannot tell which Meta-World expert acts for the task text {text!r}"
                + (f" (candidates: {', '.join(names)})" if names else ""),
                where="metaworld expert",
                hint="evaluate push-v3 and push-back-v3 in separate runs; they share a text",
            )
        return names[0]

    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        state = observation.get(ENV_STATE_KEY)
        if state is None:
            raise InvalidInput(
                f"the Meta-World expert needs {ENV_STATE_KEY}",
                where="metaworld expert",
                hint="run the env with --env.obs_type=state",
            )
        state = np.asarray(state, dtype=np.float64)
        texts = list(observation.get("task") or [""] * state.shape[0])
        actions = [
            self._experts[self._task_of(str(text))].get_action(row)
            for row, text in zip(state, texts, strict=True)
        ]
        return np.clip(np.asarray(actions, dtype=np.float32), -1.0, 1.0)

    def predict_chunk(
        self,
        observation: Mapping[str, Any],
        noise: Any | None = None,
        *,
        committed: CommittedActions | None = None,  # not flow matching: ignored
    ) -> ActionChunk:
        return ActionChunk(self.select_action(observation)[:, None, :])

    def reset(self) -> None:
        pass
