"""Acting tick by tick: the one place that keeps a policy's observation history and its actions.

A model predicts whole chunks; a control loop asks for one action per tick. `ChunkedActing`
sits between them for every policy (trained or scripted) and every caller (eval, record,
`rlctl.api`): it stacks the last `n_obs_steps` observations when the policy reads a history,
asks for a new chunk when the buffered actions are used up, and says whether the next tick reads
its observation at all. The rule is the policy's config, not each model's memory: a policy with a
history reads every observation; one without reads only when a new chunk is due. With real-time
chunking (`RealTimeChunks`) each new chunk is asked for with the leftover of the one executing.

Arrays are numpy arrays or torch tensors alike; torch is imported only to stack tensors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from rlctl.domain.action_chunk import ActionChunk, ActionQueueEmpty
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig

Batch = Mapping[str, Any]


class ActionBuffer(Protocol):
    """Where predicted chunks wait to be executed: an `ActionQueue` (the first `n_action_steps`
    of each chunk, one per tick), or a temporal ensemble that wants a chunk every tick."""

    def needs_chunk(self) -> bool: ...

    def push(self, chunk: ActionChunk) -> None: ...

    def pop(self) -> Any: ...

    def reset(self) -> None: ...


class ObservationHistory:
    """The last `n_steps` observations per key, stacked on axis 1: `(batch, n_steps, ...)`.

    The first observation of an episode fills the whole history, as LeRobot's `populate_queues`
    does, so a policy can act from the first tick.
    """

    def __init__(self, n_steps: int, keys: Sequence[str]) -> None:
        self.n_steps = n_steps
        self.keys = list(keys)
        self._queues: dict[str, deque[Any]] = {k: deque(maxlen=n_steps) for k in self.keys}

    def push(self, batch: Batch) -> dict[str, Any]:
        """Add one observation `(batch, ...)` per key; return each history `(batch, n, ...)`."""
        for key in self.keys:
            queue = self._queues[key]
            value = batch[key]
            while len(queue) < self.n_steps - 1:
                queue.append(value)
            queue.append(value)
        return {key: _stack(list(self._queues[key])) for key in self.keys}

    def reset(self) -> None:
        for queue in self._queues.values():
            queue.clear()


def _stack(values: list[Any]) -> Any:
    if isinstance(values[0], np.ndarray):
        return np.stack(values, axis=1)
    import torch

    return torch.stack(values, dim=1)


class Leftover(NamedTuple):
    """The actions of the chunk being executed that are not executed yet, `(..., steps, dims)`
    from the current tick on, in the buffer's space (a loaded policy's: normalised), and the
    ticks the robot acts on them while the next chunk is computed."""

    actions: Any
    inference_delay: int


class RealTimeChunks:
    """The buffer of real-time chunking (RTC) for a loop that waits for its chunks.

    A chunk is predicted every `steps_per_chunk` ticks, following the current one's leftover
    (`leftover()`: its next `execution_horizon` actions). A loop that waits has no real delay,
    but one can be emulated: with `inference_delay = d` the first `d` ticks after a prediction
    are still served by the previous chunk, as if the model were computing meanwhile, and the
    new chunk takes over after them, as it would on a robot whose model takes `d` ticks to
    answer. `steps_per_chunk` is `n_action_steps`, at most the chunk size less the execution
    horizon (a chunk executed to its end leaves nothing to follow).
    """

    def __init__(
        self, n_action_steps: int, *, chunk_size: int, execution_horizon: int, inference_delay: int
    ) -> None:
        self.steps_per_chunk = max(1, min(n_action_steps, chunk_size - execution_horizon))
        self.execution_horizon = execution_horizon
        self.inference_delay = max(0, min(inference_delay, self.steps_per_chunk - 1))
        self._actions: Any = None
        self._cursor = 0

    def __len__(self) -> int:
        return 0 if self._actions is None else int(self._actions.shape[-2]) - self._cursor

    def needs_chunk(self) -> bool:
        return len(self) == 0 or self._cursor >= self.steps_per_chunk

    def leftover(self) -> Leftover | None:
        """What the next chunk should follow, or None before the first chunk."""
        if self._actions is None or len(self) == 0:
            return None
        end = self._cursor + self.execution_horizon
        return Leftover(self._actions[..., self._cursor : end, :], self.inference_delay)

    def push(self, chunk: ActionChunk) -> None:
        actions = chunk.actions
        if self._actions is not None and self.inference_delay:
            # The ticks "spent computing" keep the current chunk's actions.
            kept = self._actions[..., self._cursor : self._cursor + self.inference_delay, :]
            actions = _concat([kept, actions[..., kept.shape[-2] :, :]])
        self._actions = actions
        self._cursor = 0

    def pop(self) -> Any:
        if len(self) == 0:
            raise ActionQueueEmpty(
                "the action queue is empty",
                where="action queue",
                hint="check needs_chunk() and push a new chunk from the policy first",
            )
        action = self._actions[..., self._cursor, :]
        self._cursor += 1
        return action

    def reset(self) -> None:
        self._actions = None
        self._cursor = 0


def _concat(parts: list[Any]) -> Any:
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=-2)
    import torch

    return torch.cat(parts, dim=-2)


class ChunkedActing:
    """One action per tick from a chunk-predicting function, history and buffer included.

    With a `RealTimeChunks` buffer, `predict` is called with the leftover to follow as its
    second argument (None for an episode's first chunk); otherwise with the batch alone.
    """

    def __init__(
        self, buffer: ActionBuffer, *, n_obs_steps: int = 1, history_keys: Sequence[str] = ()
    ) -> None:
        self.buffer = buffer
        self.history = ObservationHistory(n_obs_steps, history_keys) if n_obs_steps > 1 else None

    def reads_observation(self) -> bool:
        """Whether the next tick needs its (pre-processed) observation: always with a history,
        else only when a new chunk is due."""
        return self.history is not None or self.buffer.needs_chunk()

    def act(self, batch: Batch, predict: Callable[..., Any]) -> Any:
        """The next action, predicting a chunk from `batch` (with its history) when one is due."""
        if self.history is not None:
            batch = {**batch, **self.history.push(batch)}
        if self.buffer.needs_chunk():
            if isinstance(self.buffer, RealTimeChunks):
                self.buffer.push(ActionChunk(predict(batch, self.buffer.leftover())))
            else:
                self.buffer.push(ActionChunk(predict(batch)))
        return self.buffer.pop()

    def next_action(self) -> Any:
        """The next buffered action, when `reads_observation()` is false."""
        return self.buffer.pop()

    def reset(self) -> None:
        """A new episode: forget the buffered actions and the observation history."""
        self.buffer.reset()
        if self.history is not None:
            self.history.reset()


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
