"""Acting tick by tick, as every policy (local, remote, scripted) shares it: the queue a chunk
waits in, the history a policy reads, real-time chunking's leftover and delay, and when a tick
reads its observation at all."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.acting import (
    ActionQueue,
    ChunkedActing,
    InferenceDelay,
    Leftover,
    ObservationHistory,
    RealTimeChunks,
    TimedActionQueue,
    aggregation,
)
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import RandomPolicyConfig
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig
from rlctl.domain.processors.arrays import concatenate, stack


def numbered_chunk(k: int, steps: int) -> np.ndarray:
    """Chunk k `(1, steps, 1)`: action i is 100 k + i, so a misplaced action shows."""
    return (100.0 * k + np.arange(steps, dtype=np.float64))[None, :, None]


def test_a_policy_without_history_reads_only_when_a_chunk_is_due() -> None:
    acting = ChunkedActing(ActionQueue(3))
    chunks = iter([np.arange(4.0)[None, :, None] + 10 * i for i in range(3)])
    reads = []
    actions = []
    for _ in range(6):
        if acting.reads_observation():
            reads.append(len(actions))
            actions.append(float(acting.act({}, lambda batch: next(chunks))[0, 0]))
        else:
            actions.append(float(acting.next_action()[0, 0]))
    assert reads == [0, 3]
    assert actions == [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]


@given(
    n_action_steps=st.integers(1, 8),
    extra=st.integers(0, 4),
    ticks=st.integers(1, 40),
    n_obs_steps=st.integers(1, 3),
)
def test_each_tick_acts_its_chunks_own_action_and_asks_only_when_due(
    n_action_steps: int, extra: int, ticks: int, n_obs_steps: int
) -> None:
    chunk_size = n_action_steps + extra
    config = RandomPolicyConfig(
        chunk_size=chunk_size, n_action_steps=n_action_steps, n_obs_steps=n_obs_steps
    )
    acting = ChunkedActing.for_config(config, history_keys=["x"])
    asked: list[int] = []
    actions: list[float] = []
    for tick in range(ticks):
        observation = {"x": np.full((1, 2), float(tick))}
        assert acting.reads_observation() == (n_obs_steps > 1 or tick % n_action_steps == 0)
        if not acting.reads_observation():
            actions.append(float(acting.next_action()[0, 0]))
            continue

        def predict(batch: dict[str, np.ndarray], tick: int = tick) -> np.ndarray:
            history = batch["x"]
            assert history.shape == ((1, n_obs_steps, 2) if n_obs_steps > 1 else (1, 2))
            asked.append(tick)
            return numbered_chunk(len(asked) - 1, chunk_size)

        actions.append(float(acting.act(observation, predict)[0, 0]))
    assert asked == list(range(0, ticks, n_action_steps))
    assert actions == [100.0 * (t // n_action_steps) + t % n_action_steps for t in range(ticks)]


@given(n_steps=st.integers(1, 5), ticks=st.integers(1, 12))
def test_a_history_holds_the_last_observations_the_first_filling_it(
    n_steps: int, ticks: int
) -> None:
    history = ObservationHistory(n_steps, ["x", "y"])
    for episode in range(2):
        history.reset()
        for tick in range(ticks):
            out = history.push({"x": np.full((2, 3), float(tick)), "y": np.full((2,), -tick)})
            expected = [max(0, tick - k) for k in reversed(range(n_steps))]
            assert out["x"].shape == (2, n_steps, 3) and out["y"].shape == (2, n_steps)
            assert out["x"][0, :, 0].tolist() == expected, episode
            assert out["y"][1].tolist() == [-t for t in expected]


@given(
    n_action_steps=st.integers(1, 10),
    chunk_size=st.integers(2, 12),
    horizon=st.integers(1, 6),
    delay=st.integers(0, 6),
    ticks=st.integers(1, 40),
)
def test_real_time_chunks_follow_their_leftover_and_delayed_ticks_keep_the_old_chunk(
    n_action_steps: int, chunk_size: int, horizon: int, delay: int, ticks: int
) -> None:
    buffer = RealTimeChunks(
        n_action_steps, chunk_size=chunk_size, execution_horizon=horizon, inference_delay=delay
    )
    every, kept = buffer.steps_per_chunk, buffer.inference_delay
    assert 1 <= every <= max(1, min(n_action_steps, chunk_size - horizon)) and kept < every
    acting = ChunkedActing(buffer)
    leftovers: list[Leftover | None] = []
    actions = []
    for _ in range(ticks):

        def predict(batch: object, left: Leftover | None) -> np.ndarray:
            leftovers.append(left)
            return numbered_chunk(len(leftovers) - 1, chunk_size)

        actions.append(float(acting.act({}, predict)[0, 0]))
    assert leftovers[0] is None
    for k, left in enumerate(leftovers[1:]):
        # Chunk k's actions from the tick chunk k + 1 is asked at, up to the horizon.
        assert left is not None and left.inference_delay == kept
        planned = [100.0 * k + p for p in range(every, min(every + horizon, chunk_size))]
        assert left.actions[0, :, 0].tolist() == planned
    for tick, action in enumerate(actions):
        k, i = divmod(tick, every)
        # The first `kept` ticks after a prediction still act on the previous chunk, as far as
        # it reaches; every other tick acts on its own chunk's action i.
        if k and i < kept and every + i < chunk_size:
            assert action == 100.0 * (k - 1) + every + i, tick
        else:
            assert action == 100.0 * k + i, tick


def test_a_leftover_becomes_what_a_policy_is_asked_to_follow() -> None:
    rtc = RTCConfig(execution_horizon=3)
    left = Leftover(np.zeros((1, 3, 2), np.float32), 2)
    committed = left.committed(rtc)
    assert isinstance(committed, CommittedActions)
    assert (committed.inference_delay, committed.rtc, committed.steps) == (2, rtc, 3)


def test_for_config_picks_the_buffer_the_settings_ask_for() -> None:
    config = RandomPolicyConfig(
        chunk_size=10,
        n_action_steps=8,
        output_features={"action": typed_feature("ACTION", (2,))},
    )
    assert isinstance(ChunkedActing.for_config(config).buffer, ActionQueue)
    own = ActionQueue(2)
    assert ChunkedActing.for_config(config, buffer=own).buffer is own
    off = RTCConfig(enabled=False)
    assert ChunkedActing.for_config(config, rtc=off, buffer=own).buffer is own
    rtc = ChunkedActing.for_config(config, rtc=RTCConfig(execution_horizon=4), inference_delay=9)
    assert isinstance(rtc.buffer, RealTimeChunks)
    # A chunk of 10 served 8 ticks would leave 2 to follow a horizon of 4: 6 ticks, delay < 6.
    assert (rtc.buffer.steps_per_chunk, rtc.buffer.inference_delay) == (6, 5)
    assert rtc.history is None


@given(
    arrivals=st.lists(st.tuples(st.integers(0, 50), st.integers(-1, 60)), max_size=30),
    window=st.integers(1, 10),
)
def test_the_inference_delay_is_the_recent_worst_and_a_fixed_one_wins(
    arrivals: list[tuple[int, int]], window: int
) -> None:
    measured, fixed = InferenceDelay(window), InferenceDelay(window, fixed=3)
    for timestep, executed in arrivals:
        measured.arrived(timestep, executed)
        fixed.arrived(timestep, executed)
    recent = [max(0, executed + 1 - timestep) for timestep, executed in arrivals][-window:]
    assert measured.ticks() == max(recent, default=0) >= 0
    assert fixed.ticks() == 3


def test_a_timed_queue_leftover_is_its_next_actions_up_to_the_first_gap() -> None:
    queue = TimedActionQueue()
    queue.merge(5, numbered_chunk(0, 6), executed=4, fn=aggregation("latest_only"))
    left = queue.leftover(7, horizon=3, inference_delay=2)
    assert left is not None and left.inference_delay == 2
    assert left.actions[0, :, 0].tolist() == [2.0, 3.0, 4.0]
    assert queue.leftover(11, horizon=3, inference_delay=0) is None
    assert queue.leftover(10, horizon=3, inference_delay=0).actions.shape == (1, 1, 1)  # type: ignore[union-attr]


@given(
    shape=st.lists(st.integers(0, 3), min_size=1, max_size=3),
    count=st.integers(1, 4),
    axis=st.integers(-2, 1),
)
def test_stack_and_concatenate_are_numpys_on_numpy(shape: list[int], count: int, axis: int) -> None:
    values = [np.full(shape, float(i)) for i in range(count)]
    np.testing.assert_array_equal(stack(values, axis=axis), np.stack(values, axis=axis))
    if -len(shape) <= axis < len(shape):
        np.testing.assert_array_equal(
            concatenate(values, axis=axis), np.concatenate(values, axis=axis)
        )


def test_an_empty_queue_says_so() -> None:
    from rlctl.domain.acting import ActionQueueEmpty

    buffer = RealTimeChunks(2, chunk_size=4, execution_horizon=1, inference_delay=0)
    with pytest.raises(ActionQueueEmpty, match="empty"):
        buffer.pop()
    buffer.push(ActionChunk(numbered_chunk(0, 4)))
    assert buffer.leftover() is not None
    buffer.reset()
    assert buffer.leftover() is None and buffer.needs_chunk()
