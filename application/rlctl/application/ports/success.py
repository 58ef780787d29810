"""Telling success from what the cameras see: the success signal of an RL actor.

A `SuccessDetector` looks at one observation (camera frames by key, as a robot or the sim robot
gives them: `(height, width, 3)` uint8, or `(3, height, width)` floats in [0, 1]) and says how
likely it shows the task done. rlctl's trained reward classifier serves it (an adapter of
the policies), and an in-memory adapter scripts one for tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class SuccessDetector(Protocol):
    @property
    def threshold(self) -> float:
        """The probability from which an observation counts as a success."""
        ...

    def success_probability(self, observation: Mapping[str, Any]) -> float:
        """How likely `observation` shows success, in [0, 1]."""
        ...

    def is_success(self, observation: Mapping[str, Any]) -> bool:
        """`success_probability(observation) > threshold`."""
        ...
