"""Action chunks and the queue that executes them one tick at a time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.acting import ActionQueue, ActionQueueEmpty
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.errors import InvalidInput


def numbered_actions(horizon: int, action_dim: int, batch: int | None = None) -> np.ndarray:
    """Actions whose first component is their step position, so a popped action names its step."""
    steps = np.arange(horizon, dtype=np.float64)[:, None] + np.zeros(action_dim)
    if batch is None:
        return steps
    return steps[None] + 1000 * np.arange(batch)[:, None, None]


@st.composite
def chunks(draw, batched: bool = False):
    horizon = draw(st.integers(1, 16))
    action_dim = draw(st.integers(1, 4))
    batch = draw(st.integers(1, 3)) if batched else None
    is_pad = draw(st.lists(st.booleans(), min_size=horizon, max_size=horizon))
    start_step = draw(st.integers(0, 1000))
    return ActionChunk(numbered_actions(horizon, action_dim, batch), is_pad, start_step)


@given(chunks(), st.integers(1, 20))
def test_queue_hands_out_n_action_steps_in_order_never_a_padded_one(chunk, n_action_steps):
    valid = [step for step in range(chunk.horizon) if not chunk.is_pad[step]]
    queue = ActionQueue(n_action_steps)
    assert queue.needs_chunk()
    if not valid:
        with pytest.raises(InvalidInput, match="padding"):
            queue.push(chunk)
        return
    queue.push(chunk)
    expected = valid[:n_action_steps]
    executed = []
    for _ in expected:
        assert not queue.needs_chunk()
        assert queue.next_step == chunk.start_step + expected[len(executed)]
        action = queue.pop()
        assert action.shape == (chunk.action_dim,)
        executed.append(int(action[0]))
    assert executed == expected
    assert not any(chunk.is_pad[step] for step in executed)
    assert queue.needs_chunk()
    assert queue.next_step is None
    with pytest.raises(ActionQueueEmpty, match="empty"):
        queue.pop()


@given(chunks(batched=True), st.integers(1, 20))
def test_batched_queue_pops_one_row_per_environment(chunk, n_action_steps):
    valid = chunk.valid_steps.tolist()
    queue = ActionQueue(n_action_steps)
    if not valid:
        return
    queue.push(chunk)
    for step in valid[:n_action_steps]:
        action = queue.pop()
        assert action.shape == (chunk.batch_size, chunk.action_dim)
        np.testing.assert_array_equal(action, chunk.actions[:, step, :])
    assert queue.needs_chunk()


@given(st.integers(1, 10), st.integers(1, 40))
def test_control_loop_asks_for_a_chunk_every_n_action_steps(n_action_steps, ticks):
    queue = ActionQueue(n_action_steps)
    chunks_asked = 0
    for tick in range(ticks):
        if queue.needs_chunk():
            chunks_asked += 1
            queue.push(ActionChunk(numbered_actions(n_action_steps + 3, 2), start_step=tick))
        assert queue.next_step == tick
        queue.pop()
    assert chunks_asked == -(-ticks // n_action_steps)


@given(chunks(), st.integers(0, 20))
def test_take_keeps_the_first_steps_and_their_padding(chunk, n):
    taken = chunk.take(n)
    kept = min(n, chunk.horizon)
    assert taken.horizon == kept
    assert taken.start_step == chunk.start_step
    np.testing.assert_array_equal(taken.is_pad, chunk.is_pad[:kept])
    np.testing.assert_array_equal(taken.actions, chunk.actions[:kept])


@given(chunks(batched=True))
def test_valid_drops_the_padded_steps(chunk):
    valid = chunk.valid()
    np.testing.assert_array_equal(valid, chunk.actions[:, ~chunk.is_pad, :])


def test_chunk_defaults_to_no_padding_and_reports_its_shape():
    chunk = ActionChunk(np.zeros((5, 3)))
    assert chunk.is_pad.tolist() == [False] * 5
    assert (chunk.horizon, chunk.action_dim, chunk.batch_size) == (5, 3, None)
    assert ActionChunk(np.zeros((2, 5, 3))).batch_size == 2
    assert chunk.step(4).shape == (3,)


@pytest.mark.parametrize("actions", [np.zeros(3), np.zeros((1, 2, 3, 4)), [[1.0, 2.0]]])
def test_chunk_rejects_actions_of_the_wrong_rank(actions):
    with pytest.raises(InvalidInput, match="shape"):
        ActionChunk(actions)


def test_chunk_rejects_a_mask_of_another_length():
    with pytest.raises(InvalidInput, match=r"is_pad must have shape \(4,\)"):
        ActionChunk(np.zeros((2, 4, 3)), is_pad=np.zeros((2, 4), dtype=bool))
    with pytest.raises(InvalidInput):
        ActionChunk(np.zeros((4, 3))).take(-1)


def test_queue_refuses_a_new_chunk_while_actions_remain_and_reset_empties_it():
    queue = ActionQueue(3)
    queue.push(ActionChunk(numbered_actions(5, 1)))
    queue.pop()
    assert len(queue) == 2
    with pytest.raises(InvalidInput, match="still holds 2 actions"):
        queue.push(ActionChunk(numbered_actions(5, 1)))
    queue.reset()
    assert queue.needs_chunk()
    with pytest.raises(InvalidInput):
        ActionQueue(0)


class DeviceArray:
    """Stands in for a torch tensor on a GPU: shape and indexing only, no trip through numpy."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    def __getitem__(self, index) -> DeviceArray:
        return DeviceArray(self.data[index])

    def __array__(self, *args, **kwargs):
        raise AssertionError("the actions were copied to the host")


def test_queue_only_indexes_the_actions_so_tensors_stay_on_their_device():
    data = np.arange(2 * 6 * 3, dtype=np.float32).reshape(2, 6, 3)
    is_pad = [False, True, False, False, False, True]
    queue = ActionQueue(3)
    chunk = ActionChunk(DeviceArray(data), is_pad)
    assert chunk.valid().shape == (2, 4, 3)
    queue.push(chunk)
    popped = [queue.pop() for _ in range(3)]
    assert all(isinstance(action, DeviceArray) for action in popped)
    np.testing.assert_array_equal(np.stack([a.data for a in popped], axis=1), data[:, [0, 2, 3]])
    assert queue.needs_chunk()
