"""One action per tick from a policy that predicts chunks: history, buffer, and when to read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlctl.domain.acting.history import ObservationHistory
from rlctl.domain.acting.queues import ActionBuffer, ActionQueue, RealTimeChunks
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.policies.config import PolicyConfig
from rlctl.domain.policies.rtc import RTCConfig

Batch = Mapping[str, Any]


class ChunkedActing:
    """One action per tick from a chunk-predicting function, history and buffer included.

    It stacks the last `n_obs_steps` observations when the policy reads a history, asks for a
    new chunk when the buffered actions are used up, and says whether the next tick reads its
    observation at all: a policy with a history reads every observation; one without reads only
    when a new chunk is due. With a `RealTimeChunks` buffer, `predict` is called with the
    leftover to follow as its second argument (None for an episode's first chunk); otherwise
    with the batch alone.
    """

    def __init__(
        self, buffer: ActionBuffer, *, n_obs_steps: int = 1, history_keys: Sequence[str] = ()
    ) -> None:
        self.buffer = buffer
        self.history = ObservationHistory(n_obs_steps, history_keys) if n_obs_steps > 1 else None

    @classmethod
    def for_config(
        cls,
        config: PolicyConfig,
        *,
        rtc: RTCConfig | None = None,
        inference_delay: int = 0,
        buffer: ActionBuffer | None = None,
        history_keys: Sequence[str] = (),
    ) -> ChunkedActing:
        """The acting `config` asks for: a history of `n_obs_steps` over `history_keys`; with
        `rtc` enabled, real-time chunking (emulating `inference_delay` ticks); else `buffer` (a
        model's own, as ACT's temporal ensemble), by default a queue of `n_action_steps`."""
        if rtc is not None and rtc.enabled:
            buffer = RealTimeChunks(
                config.n_action_steps,
                chunk_size=int(getattr(config, "chunk_size", config.n_action_steps)),
                execution_horizon=rtc.execution_horizon,
                inference_delay=inference_delay,
            )
        elif buffer is None:
            buffer = ActionQueue(config.n_action_steps)
        return cls(buffer, n_obs_steps=config.n_obs_steps, history_keys=history_keys)

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
