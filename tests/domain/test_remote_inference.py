"""Merging arriving chunks with queued actions: LeRobot's aggregations, and no stale action."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.acting import AGGREGATIONS, TimedActionQueue, aggregation
from rlctl.domain.errors import InvalidInput
from rlctl.domain.remote_inference import RemotePolicySettings, parse_address

OLD, NEW = np.array([1.0, 10.0]), np.array([3.0, 20.0])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("latest_only", [3.0, 20.0]),
        ("average", [2.0, 15.0]),
        ("weighted_average", [0.3 * 1 + 0.7 * 3, 0.3 * 10 + 0.7 * 20]),
        ("conservative", [0.7 * 1 + 0.3 * 3, 0.7 * 10 + 0.3 * 20]),
    ],
)
def test_aggregations_weigh_as_lerobot(name: str, expected: list[float]) -> None:
    np.testing.assert_allclose(aggregation(name)(OLD, NEW), expected)


def test_unknown_aggregation_names_the_choices() -> None:
    with pytest.raises(InvalidInput, match="median") as raised:
        aggregation("median")
    assert "latest_only" in (raised.value.hint or "")


def chunk(start: int, steps: int, dim: int = 2) -> np.ndarray:
    """(1, steps, dim): every value of the action for tick t is t."""
    ticks = np.arange(start, start + steps, dtype=np.float64)
    return np.repeat(ticks[None, :, None], dim, axis=2)


@given(
    chunks=st.lists(
        st.tuples(st.integers(0, 40), st.integers(1, 12), st.integers(-1, 45)),
        min_size=1,
        max_size=8,
    ),
    name=st.sampled_from(sorted(AGGREGATIONS)),
)
def test_merged_queue_holds_only_future_ticks_and_their_own_values(
    chunks: list[tuple[int, int, int]], name: str
) -> None:
    queue = TimedActionQueue()
    for start, steps, executed in chunks:
        kept = queue.merge(start, chunk(start, steps), executed, aggregation(name))
        expected = [t for t in range(start, start + steps) if t > executed]
        assert kept == len(expected)
        # Every aggregation of two actions for the same tick keeps that tick's value.
        for tick in expected:
            action = queue.pop(tick)
            assert action is not None
            np.testing.assert_allclose(action, tick)
        assert queue.remaining(0) == 0


@given(
    old=st.lists(st.floats(-100, 100), min_size=3, max_size=3),
    new=st.lists(st.floats(-100, 100), min_size=3, max_size=3),
    name=st.sampled_from(sorted(AGGREGATIONS)),
)
def test_aggregates_lie_between_queued_and_arriving(
    old: list[float], new: list[float], name: str
) -> None:
    a, b = np.array(old), np.array(new)
    out = aggregation(name)(a, b)
    assert np.all(out >= np.minimum(a, b) - 1e-9)
    assert np.all(out <= np.maximum(a, b) + 1e-9)


def test_overlap_is_aggregated_and_the_newest_chunk_decides_the_reach() -> None:
    queue = TimedActionQueue()
    queue.merge(0, np.zeros((1, 6, 1)), executed=-1, fn=aggregation("average"))
    assert queue.pop(0) is not None and queue.pop(1) is not None
    # A chunk computed at tick 1 arrives after tick 1 ran: its action for tick 1 is dropped,
    # ticks 2..4 are averaged with the queued zeros, tick 5 (queued, not covered) is dropped.
    kept = queue.merge(1, np.full((1, 4, 1), 2.0), executed=1, fn=aggregation("average"))
    assert kept == 3
    assert [float(queue.pop(t)[0, 0]) for t in (2, 3, 4)] == [1.0, 1.0, 1.0]  # type: ignore[index]
    assert queue.pop(5) is None


def test_pop_discards_skipped_ticks_and_threshold_counts_what_is_left() -> None:
    queue = TimedActionQueue()
    queue.merge(0, chunk(0, 10), executed=-1, fn=aggregation("latest_only"))
    assert not queue.needs_chunk(0, 10, 0.5)
    action = queue.pop(6)  # ticks 0..5 were never executed: they go, unreturned
    assert action is not None and float(action[0, 0]) == 6.0
    assert queue.pop(3) is None
    assert queue.remaining(7) == 3
    assert queue.needs_chunk(7, 10, 0.5)


def test_settings_are_checked() -> None:
    assert parse_address("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_address("[::1]:9") == ("::1", 9)
    with pytest.raises(InvalidInput, match="HOST:PORT"):
        RemotePolicySettings(server="localhost")
    with pytest.raises(InvalidInput, match="chunk_size_threshold"):
        RemotePolicySettings(chunk_size_threshold=1.5)
    with pytest.raises(InvalidInput, match="safe_action"):
        RemotePolicySettings(on_stall="safe_action")
