"""The `Policy` port's members a policy's config answers, shared by local, remote and fake ones."""

from __future__ import annotations

from collections.abc import Mapping

from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies.config import PolicyConfig


class ConfigDescribed[C: PolicyConfig]:
    """The `Policy` port's members that a policy's config answers: the config, its features and
    the actions per chunk; for policies that keep their config in `_config` and rename nothing
    of their own (`observation_features` gives back what it is given)."""

    _config: C

    @property
    def config(self) -> C:
        return self._config

    @property
    def input_features(self) -> Mapping[str, FeatureSpec]:
        return self._config.input_features

    @property
    def output_features(self) -> Mapping[str, FeatureSpec]:
        return self._config.output_features

    @property
    def actions_per_chunk(self) -> int:
        return self._config.n_action_steps

    def observation_features(self, provided: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        return dict(provided)
