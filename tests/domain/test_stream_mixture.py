"""Interleaving streamed datasets: a pass takes each dataset's weight's part, in a seeded order."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.errors import InvalidInput
from rlctl.domain.stream_mixture import interleave_order, pass_counts, restart_epoch

frames = st.lists(st.integers(0, 500), min_size=1, max_size=5)


@given(frames=frames)
def test_without_weights_each_dataset_gives_exactly_its_share(frames):
    assert pass_counts(frames, None) == frames


@given(
    frames=frames,
    weights=st.lists(st.floats(0.01, 100.0), min_size=5, max_size=5),
)
def test_weights_split_the_pass_within_one_frame(frames, weights):
    weights = weights[: len(frames)]
    counts = pass_counts(frames, weights)

    assert sum(counts) == sum(frames)
    held = [w if n > 0 else 0.0 for w, n in zip(weights, frames)]
    if sum(frames):
        for count, weight in zip(counts, held):
            assert abs(count - weight / sum(held) * sum(frames)) < 1
    for count, n in zip(counts, frames):
        if n == 0:
            assert count == 0  # nothing of it here: the others share its weight


def test_weights_may_ask_more_than_a_dataset_holds():
    assert pass_counts([10, 90], [1, 1]) == [50, 50]
    assert pass_counts([10, 90], [3, 1]) == [75, 25]
    assert pass_counts([0, 0], [1, 2]) == [0, 0]


@pytest.mark.parametrize(
    ("frames", "weights", "match"),
    [([1, 2], [1.0], "2 datasets"), ([1, 2], [1.0, 0.0], "positive"), ([-1], None, "0 or more")],
)
def test_bad_counts_and_weights_are_refused(frames, weights, match):
    with pytest.raises(InvalidInput, match=match):
        pass_counts(frames, weights)


@given(
    counts=st.lists(st.integers(0, 50), min_size=1, max_size=4),
    seed=st.integers(0, 2**40),
    epoch=st.integers(0, 2**33),
    shard=st.integers(0, 16),
)
def test_the_order_holds_each_dataset_its_count_and_is_a_function_of_its_seeds(
    counts, seed, epoch, shard
):
    order = interleave_order(counts, seed=seed, epoch=epoch, shard=shard)

    assert Counter(order.tolist()) == Counter({i: n for i, n in enumerate(counts) if n})
    assert np.array_equal(order, interleave_order(counts, seed=seed, epoch=epoch, shard=shard))


def test_orders_differ_by_epoch_and_shard():
    one = interleave_order([50, 50], seed=1, epoch=0, shard=0)
    assert not np.array_equal(one, interleave_order([50, 50], seed=1, epoch=1, shard=0))
    assert not np.array_equal(one, interleave_order([50, 50], seed=1, epoch=0, shard=1))
    assert not np.array_equal(one, interleave_order([50, 50], seed=2, epoch=0, shard=0))


def test_restarts_read_other_epochs_than_the_passes():
    assert restart_epoch(7, 0) == 7
    later = {restart_epoch(epoch, run) for epoch in range(50) for run in range(1, 5)}
    assert len(later) == 200 and min(later) >= 2**31 and max(later) < 2**32
    with pytest.raises(InvalidInput):
        restart_epoch(0, -1)
