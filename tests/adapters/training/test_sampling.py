"""The step sampler: a pure function of (seed, step), epochs that cover every frame, DDP shards."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.adapters.training.sampling import StepBatchSampler, _seed_of, usable_positions
from rlctl.domain.errors import InvalidInput


def frames(batch: list[tuple[int, int]]) -> list[int]:
    return [position for position, _ in batch]


def test_usable_positions_drop_the_last_frames_of_each_episode():
    assert usable_positions([3, 4], 0).tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert usable_positions([3, 4], 2).tolist() == [0, 3, 4]
    with pytest.raises(InvalidInput, match="no frame left"):
        usable_positions([2, 2], 2)
    # A negative count (LeRobot's multi-task DiT computes one for short horizons) drops nothing
    # and never reaches past the dataset's last frame.
    assert usable_positions([3, 4], -1).tolist() == [0, 1, 2, 3, 4, 5, 6]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 30),
    batch=st.integers(1, 7),
    seed=st.integers(0, 2**31 - 1),
    start=st.integers(0, 20),
)
def test_resuming_at_a_step_replays_the_same_batches(n, batch, seed, start):
    positions = np.arange(n)
    full = StepBatchSampler(positions, batch_size=batch, seed=seed)
    resumed = StepBatchSampler(positions, batch_size=batch, seed=seed, start_step=start)
    expected = list(itertools.islice(iter(full), start, start + 5))
    assert list(itertools.islice(iter(resumed), 5)) == expected


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 25), batch=st.integers(1, 6), seed=st.integers(0, 1000))
def test_each_epoch_visits_every_frame_once(n, batch, seed):
    positions = np.arange(100, 100 + n)
    sampler = StepBatchSampler(positions, batch_size=batch, seed=seed)
    steps = (3 * n) // batch + 1
    seen = [f for b in itertools.islice(iter(sampler), steps) for f in frames(b)]
    for epoch in range(len(seen) // n):
        assert sorted(seen[epoch * n : (epoch + 1) * n]) == positions.tolist()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 40), batch=st.integers(1, 5), world=st.integers(2, 4), step=st.integers(0, 9)
)
def test_ranks_split_a_step_like_one_process_with_a_bigger_batch(n, batch, world, step):
    positions = np.arange(n)
    one = StepBatchSampler(positions, batch_size=batch * world, seed=3).batch(step)
    ranks = [
        StepBatchSampler(positions, batch_size=batch, seed=3, rank=r, world_size=world).batch(step)
        for r in range(world)
    ]
    assert [key for part in ranks for key in part] == one


def test_sample_seeds_differ_between_positions_and_runs():
    positions = np.arange(10)
    a = StepBatchSampler(positions, batch_size=10, seed=1).batch(0)
    b = StepBatchSampler(positions, batch_size=10, seed=2).batch(0)
    assert len({s for _, s in a}) == 10
    assert {s for _, s in a}.isdisjoint({s for _, s in b})
    assert Counter(frames(a)) == Counter(range(10))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 30),
    batch=st.integers(1, 70),
    seed=st.integers(0, 2**31 - 1),
    step=st.integers(0, 30),
    weighted=st.booleans(),
)
def test_a_batch_is_the_stream_position_by_position(n, batch, seed, step, weighted):
    """The batch, computed for all its positions at once (several epochs when the batch is
    larger than the dataset), is position p -> frame perm(seed, p // n)[p % n] and its seed;
    without sample seeds the same frames with seed 0."""
    positions = np.arange(50, 50 + n)
    probabilities = np.linspace(1, 2, n) / np.linspace(1, 2, n).sum() if weighted else None
    sampler = StepBatchSampler(positions, batch_size=batch, seed=seed, probabilities=probabilities)
    first = step * batch
    expected = []
    for p in range(first, first + batch):
        epoch, offset = divmod(p, n)
        expected.append((int(positions[sampler.order(epoch)[offset]]), _seed_of(seed, p, 1)))
    assert sampler.batch(step) == expected
    unseeded = StepBatchSampler(
        positions, batch_size=batch, seed=seed, probabilities=probabilities, sample_seeds=False
    )
    assert unseeded.batch(step) == [(frame, 0) for frame, _ in expected]
