"""What a processor step is: a named, configured, optionally stateful Transition -> Transition.

A step's `config` is a frozen attrs class (written to JSON through `serialization.converter`); its
array state (normalisation statistics …) travels separately through `state_dict` /
`load_state_dict`, so a saved pipeline is one small JSON document plus named arrays, as in LeRobot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import numpy as np

from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Transition


@runtime_checkable
class ProcessorStep(Protocol):
    """The contract every step meets, whether it lives in the domain or in an adapter."""

    name: ClassVar[str]
    # `type[Any]`, not `type`: a step's own config class is then accepted (ClassVars are invariant).
    config_class: ClassVar[type[Any]]
    config: Any

    def __init__(self, config: Any = None) -> None: ...

    def __call__(self, transition: Transition) -> Transition: ...

    def state_dict(self) -> dict[str, np.ndarray]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    def transform_features(self, features: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]: ...


@attrs.frozen
class NoConfig:
    """The config of a step without settings; it is written as `{}`."""


class Step[ConfigT]:
    """Base class for steps: holds the config, has no state and leaves features unchanged.

    Subclasses set `config_class`, implement `__call__`, and are registered with
    `@register_step("registry_name")`, which also sets `name`.
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type[Any]] = NoConfig

    def __init__(self, config: ConfigT | None = None) -> None:
        if config is None:
            config = self.config_class()
        if not isinstance(config, self.config_class):
            raise ConfigError(
                f"{type(self).__name__} takes a {self.config_class.__name__}, "
                f"got {type(config).__name__}",
                where=self.name or type(self).__name__,
            )
        self.config: ConfigT = config

    def __call__(self, transition: Transition) -> Transition:
        raise NotImplementedError

    def state_dict(self) -> dict[str, np.ndarray]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state:
            raise ConfigError(
                f"step has no array state but was given {sorted(state)}",
                where=self.name or type(self).__name__,
            )

    def transform_features(self, features: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        return dict(features)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"
