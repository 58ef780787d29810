"""Clip features to per-dimension bounds, e.g. joint limits on the action sent to a robot."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import ConfigError
from rlctl.domain.frames import Transition
from rlctl.domain.processors.arrays import constant_like, require_array
from rlctl.domain.processors.registry import register_step
from rlctl.domain.processors.step import Step

ACTION_KEY = "action"


def _floats(value: Any) -> tuple[float, ...]:
    if isinstance(value, int | float):
        return (float(value),)
    return tuple(float(v) for v in value)


@attrs.frozen
class ClipRange:
    """Bounds for one feature; one value broadcasts over every dimension."""

    min: tuple[float, ...] = attrs.field(converter=_floats)
    max: tuple[float, ...] = attrs.field(converter=_floats)

    def __attrs_post_init__(self) -> None:
        if len(self.min) != len(self.max):
            raise ConfigError(f"min has {len(self.min)} values but max has {len(self.max)}")
        if any(low > high for low, high in zip(self.min, self.max)):
            raise ConfigError(f"min {list(self.min)} exceeds max {list(self.max)}")


def _ranges(value: dict[str, Any]) -> dict[str, ClipRange]:
    return {
        key: bounds if isinstance(bounds, ClipRange) else ClipRange(**bounds)
        for key, bounds in value.items()
    }


@attrs.frozen
class ClipConfig:
    """Feature key (`"action"` or an observation key) -> its bounds."""

    ranges: dict[str, ClipRange] = attrs.field(factory=dict, converter=_ranges)


@register_step("clip_processor")
class Clip(Step[ClipConfig]):
    config_class = ClipConfig

    def __call__(self, transition: Transition) -> Transition:
        observation = dict(transition.observation)
        action = transition.action
        for key, bounds in self.config.ranges.items():
            if key == ACTION_KEY:
                if action is not None:
                    action = _clip(action, bounds, key)
            elif key in observation:
                observation[key] = _clip(observation[key], bounds, key)
        return transition.evolve(observation=observation, action=action)


def _clip(x: Any, bounds: ClipRange, key: str) -> Any:
    require_array(x, key)
    low = constant_like(np.array(bounds.min), x)
    high = constant_like(np.array(bounds.max), x)
    return x.clip(low, high)
