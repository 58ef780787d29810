"""The observations a policy with a history (`n_obs_steps > 1`) reads, stacked tick by tick."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from rlctl.domain.processors.arrays import stack


class ObservationHistory:
    """The last `n_steps` observations per key, stacked on axis 1: `(batch, n_steps, ...)`.

    The first observation of an episode fills the whole history, as LeRobot's `populate_queues`
    does, so a policy can act from the first tick. Arrays are numpy arrays or torch tensors.
    """

    def __init__(self, n_steps: int, keys: Sequence[str]) -> None:
        self.n_steps = n_steps
        self.keys = list(keys)
        self._queues: dict[str, deque[Any]] = {k: deque(maxlen=n_steps) for k in self.keys}

    def push(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Add one observation `(batch, ...)` per key; return each history `(batch, n, ...)`."""
        for key in self.keys:
            queue = self._queues[key]
            value = batch[key]
            while len(queue) < self.n_steps - 1:
                queue.append(value)
            queue.append(value)
        return {key: stack(list(self._queues[key]), axis=1) for key in self.keys}

    def reset(self) -> None:
        for queue in self._queues.values():
            queue.clear()
