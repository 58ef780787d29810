"""Where predicted chunks wait to be executed, one action per control tick.

- `ActionQueue`: the first `n_action_steps` unpadded actions of each chunk, in order.
- `RealTimeChunks`: real-time chunking's buffer; each new chunk follows the `Leftover` of the one
  executing, and an inference delay can be emulated.
- Any other `ActionBuffer` (ACT's temporal ensemble, in the torch adapters) plugs in the same.

Actions are numpy arrays or torch tensors alike: only indexing and `.shape` are used here, and
the one join goes through `rlctl.domain.processors.arrays`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from rlctl.domain.action_chunk import ActionChunk, Actions, select_steps
from rlctl.domain.errors import InvalidInput
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig
from rlctl.domain.processors.arrays import concatenate


class ActionBuffer(Protocol):
    """Where predicted chunks wait to be executed: an `ActionQueue` (the first `n_action_steps`
    of each chunk, one per tick), or a temporal ensemble that wants a chunk every tick."""

    def needs_chunk(self) -> bool: ...

    def push(self, chunk: ActionChunk) -> None: ...

    def pop(self) -> Any: ...

    def reset(self) -> None: ...


class ActionQueueEmpty(InvalidInput):
    """`pop()` was called on an action queue that holds no action."""


def _empty() -> ActionQueueEmpty:
    return ActionQueueEmpty(
        "the action queue is empty",
        where="action queue",
        hint="check needs_chunk() and push a new chunk from the policy first",
    )


class ActionQueue:
    """Hands out one action per control tick from the last chunk pushed.

    `push` keeps the first `n_action_steps` unpadded steps of a chunk (padding is skipped, so it
    is never executed); `pop` returns them one by one, `(action_dim,)` for an unbatched chunk and
    `(batch, action_dim)` for a batched one; `needs_chunk` turns true once they are used up.
    """

    def __init__(self, n_action_steps: int) -> None:
        if n_action_steps < 1:
            raise InvalidInput(
                f"n_action_steps must be >= 1, got {n_action_steps}", where="action queue"
            )
        self.n_action_steps = n_action_steps
        self._actions: Actions = None
        self._steps: Sequence[int] = ()
        self._cursor = 0

    def __len__(self) -> int:
        return len(self._steps) - self._cursor

    def needs_chunk(self) -> bool:
        return len(self) == 0

    @property
    def next_step(self) -> int | None:
        """The control step of the action `pop` returns next, or None when empty."""
        return self._steps[self._cursor] if len(self) else None

    def push(self, chunk: ActionChunk) -> None:
        if not self.needs_chunk():
            raise InvalidInput(
                f"the action queue still holds {len(self)} actions",
                where="action queue",
                hint="pop the remaining actions or call reset() before pushing a new chunk",
            )
        kept = chunk.valid_steps[: self.n_action_steps]
        if kept.size == 0:
            raise InvalidInput(
                f"every step of the action chunk starting at step {chunk.start_step} is padding",
                where="action queue",
                hint="a chunk must hold at least one executable action",
            )
        # Kept as one array (a view when the steps are contiguous): no per-step copies.
        self._actions = select_steps(chunk.actions, kept, chunk.horizon)
        self._steps = [chunk.start_step + int(position) for position in kept]
        self._cursor = 0

    def pop(self) -> Actions:
        if self.needs_chunk():
            raise _empty()
        action = self._actions[..., self._cursor, :]
        self._cursor += 1
        if self.needs_chunk():
            self._actions = None  # let go of the chunk (it may hold GPU memory)
        return action

    def reset(self) -> None:
        self._actions = None
        self._steps = ()
        self._cursor = 0


class Leftover(NamedTuple):
    """What the next chunk should follow (real-time chunking): the actions of the chunk being
    executed that are not executed yet, `(..., steps, dims)` from the current tick on, and the
    ticks the robot acts on them while the next chunk is computed.

    Local acting keeps them in its buffer's space (a loaded policy's: normalised); a robot
    talking to a server keeps raw actions, which is what `committed` hands a policy."""

    actions: Any
    inference_delay: int

    def committed(self, rtc: RTCConfig) -> CommittedActions:
        """The leftover as a `Policy.predict_chunk` caller sends it, to be followed per `rtc`."""
        return CommittedActions(actions=self.actions, inference_delay=self.inference_delay, rtc=rtc)


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
            actions = concatenate([kept, actions[..., kept.shape[-2] :, :]], axis=-2)
        self._actions = actions
        self._cursor = 0

    def pop(self) -> Any:
        if len(self) == 0:
            raise _empty()
        action = self._actions[..., self._cursor, :]
        self._cursor += 1
        return action

    def reset(self) -> None:
        self._actions = None
        self._cursor = 0
