"""One time step, as recorded (`Frame`) and as it flows through processors (`Transition`)."""

from __future__ import annotations

from collections.abc import KeysView, Mapping
from typing import Any

import attrs


@attrs.frozen
class Frame:
    """One dataset row before it is written: feature key -> value, plus its task text.

    `values` holds the user features (state, action, images …); the bookkeeping columns
    (index, episode_index, frame_index, timestamp, task_index) are the writer's job.
    """

    values: Mapping[str, Any]
    task: str = ""
    timestamp: float | None = None

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def keys(self) -> KeysView[str]:
        return self.values.keys()


@attrs.frozen
class Transition:
    """What a processor step sees and returns. Arrays may be numpy arrays or torch tensors.

    `complementary_data` carries what travels beside the tensors: the task text, indices,
    `*_is_pad` masks. Steps never mutate a transition; they return `evolve(...)`d copies.
    """

    observation: Mapping[str, Any] = attrs.field(factory=dict)
    action: Any = None
    reward: Any = None
    done: Any = False
    truncated: Any = False
    info: Mapping[str, Any] = attrs.field(factory=dict)
    complementary_data: Mapping[str, Any] = attrs.field(factory=dict)

    def evolve(self, **changes: Any) -> Transition:
        return attrs.evolve(self, **changes)

    def with_observation(self, **values: Any) -> Transition:
        return attrs.evolve(self, observation={**self.observation, **values})
