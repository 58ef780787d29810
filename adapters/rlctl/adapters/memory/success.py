"""A scripted `SuccessDetector`: the probabilities it is given, one per question, in turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlctl.domain.errors import InvalidInput


class ScriptedSuccessDetector:
    def __init__(self, probabilities: Sequence[float], threshold: float = 0.5) -> None:
        self._probabilities = [float(p) for p in probabilities]
        self._threshold = float(threshold)
        self.seen: list[Mapping[str, Any]] = []

    @property
    def threshold(self) -> float:
        return self._threshold

    def success_probability(self, observation: Mapping[str, Any]) -> float:
        if len(self.seen) >= len(self._probabilities):
            raise InvalidInput(
                f"the scripted success detector was asked {len(self.seen) + 1} times and holds "
                f"{len(self._probabilities)} answers",
                where="ScriptedSuccessDetector",
            )
        self.seen.append(observation)
        return self._probabilities[len(self.seen) - 1]

    def is_success(self, observation: Mapping[str, Any]) -> bool:
        return self.success_probability(observation) > self._threshold
