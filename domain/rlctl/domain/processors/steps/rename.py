"""Rename observation keys, e.g. a camera called `top` by the robot and `front` by the policy."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Transition
from rlctl.domain.processors.registry import register_step
from rlctl.domain.processors.step import Step


def _renames(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


@attrs.frozen
class RenameConfig:
    rename_map: dict[str, str] = attrs.field(factory=dict, converter=_renames)


@register_step("rename_observations_processor")
class RenameObservations(Step[RenameConfig]):
    """Keys in `rename_map` take their new name; other keys are kept as they are."""

    config_class = RenameConfig

    def __call__(self, transition: Transition) -> Transition:
        renames = self.config.rename_map
        observation = {renames.get(key, key): v for key, v in transition.observation.items()}
        return transition.evolve(observation=observation)

    def transform_features(self, features: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        out: dict[str, FeatureSpec] = {}
        for key, spec in features.items():
            new_key = self.config.rename_map.get(key, key)
            out[new_key] = spec if new_key == key else attrs.evolve(spec, key=new_key)
        return out
