"""A robot's queue when its chunks arrive from a policy server while it keeps acting.

The robot sends an observation stamped with the control tick it was taken at; the chunk that
answers it applies action `i` at tick `timestep + i`. Chunks arrive while the robot keeps
acting, so an arriving chunk meets actions already queued for the same ticks: they are merged by
one of LeRobot's aggregation rules (`latest_only`, `average`, `weighted_average`,
`conservative`). Actions for ticks already executed are dropped: a late chunk never replays
the past. How many ticks that lateness is (the inference delay real-time chunking allows for)
is measured by `InferenceDelay`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from rlctl.domain.acting.queues import Leftover
from rlctl.domain.errors import InvalidInput

Aggregate = Callable[[np.ndarray, np.ndarray], np.ndarray]

# Same weights as LeRobot's async inference (`old`: the queued action, `new`: the arriving one).
AGGREGATIONS: dict[str, Aggregate] = {
    "latest_only": lambda old, new: new,
    "average": lambda old, new: 0.5 * old + 0.5 * new,
    "weighted_average": lambda old, new: 0.3 * old + 0.7 * new,
    "conservative": lambda old, new: 0.7 * old + 0.3 * new,
}


def aggregation(name: str) -> Aggregate:
    try:
        return AGGREGATIONS[name]
    except KeyError:
        raise InvalidInput(
            f"unknown aggregation {name!r}",
            where="policy.aggregate",
            hint=f"choose one of {', '.join(AGGREGATIONS)}",
        ) from None


class TimedActionQueue:
    """Actions keyed by the control tick they apply at.

    `merge` takes an arriving chunk: ticks at or before `executed` are dropped; a tick also queued
    is aggregated (`fn(queued, arriving)`); queued ticks the chunk does not cover are dropped, as
    LeRobot's client does (the newest chunk decides how far the queue reaches).
    """

    def __init__(self) -> None:
        self._actions: dict[int, np.ndarray] = {}

    def merge(self, start: int, actions: np.ndarray, executed: int, fn: Aggregate) -> int:
        """Merge `actions[..., i, :]` for ticks `start + i`; return how many were kept."""
        steps = actions.shape[-2]
        merged: dict[int, np.ndarray] = {}
        for i in range(steps):
            tick = start + i
            if tick <= executed:
                continue
            new = actions[..., i, :]
            old = self._actions.get(tick)
            merged[tick] = new if old is None else fn(old, new)
        self._actions = merged
        return len(merged)

    def pop(self, tick: int) -> np.ndarray | None:
        """The action for `tick` (removed), or None; earlier actions are discarded unexecuted."""
        for stale in [t for t in self._actions if t < tick]:
            del self._actions[stale]
        return self._actions.pop(tick, None)

    def upcoming(self, tick: int, limit: int) -> np.ndarray | None:
        """The queued actions for `tick`, `tick + 1`, … (at most `limit`, up to the first gap),
        stacked on axis -2; None when `tick` has none."""
        actions: list[np.ndarray] = []
        while len(actions) < limit and tick + len(actions) in self._actions:
            actions.append(self._actions[tick + len(actions)])
        return np.stack(actions, axis=-2) if actions else None

    def leftover(self, tick: int, horizon: int, inference_delay: int) -> Leftover | None:
        """What a chunk asked for at `tick` should follow (real-time chunking): the next
        `horizon` queued actions from `tick` on; None when `tick` has none."""
        actions = self.upcoming(tick, horizon)
        return None if actions is None else Leftover(actions, inference_delay)

    def remaining(self, tick: int) -> int:
        """How many queued actions apply at `tick` or later."""
        return sum(1 for t in self._actions if t >= tick)

    def needs_chunk(self, tick: int, chunk_size: int, threshold: float) -> bool:
        return self.remaining(tick) / max(1, chunk_size) <= threshold

    def clear(self) -> None:
        self._actions.clear()


class InferenceDelay:
    """Ticks a robot acts on queued actions while a chunk is computed, measured per chunk: the
    ticks executed from the one its observation was taken at until it arrived. A new chunk is
    asked to allow for the most of the last `window` (the worst recent case), or for `fixed`
    ticks when set."""

    def __init__(self, window: int = 100, *, fixed: int | None = None) -> None:
        self.fixed = fixed
        self.samples: deque[int] = deque(maxlen=window)

    def arrived(self, timestep: int, executed: int) -> None:
        """A chunk asked at tick `timestep` arrived after tick `executed` was acted."""
        self.samples.append(max(0, executed + 1 - timestep))

    def ticks(self) -> int:
        return self.fixed if self.fixed is not None else max(self.samples, default=0)
