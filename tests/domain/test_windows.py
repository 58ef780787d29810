"""Windows: LeRobot 0.6.1's delta_timestamps semantics, as properties and against its output."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.errors import InvalidInput
from rlctl.domain.windows import (
    check_delta_timestamps,
    delta_indices,
    is_pad_key,
    query_windows,
    window,
    window_batch,
)


def lerobot_query_indices(idx, ep_start, ep_end, delta_idx):
    """LeRobot 0.6.1 `LeRobotDataset._get_query_indices`, for one key, verbatim in meaning."""
    indices = [max(ep_start, min(ep_end - 1, idx + delta)) for delta in delta_idx]
    padding = [(idx + delta < ep_start) | (idx + delta >= ep_end) for delta in delta_idx]
    return indices, padding


@st.composite
def rows_in_episodes(draw):
    start = draw(st.integers(0, 1_000))
    length = draw(st.integers(1, 60))
    index = draw(st.integers(start, start + length - 1))
    deltas = draw(st.lists(st.integers(-80, 80), max_size=12))
    return index, start, start + length, deltas


@given(rows_in_episodes())
def test_window_stays_inside_the_episode_and_marks_exactly_the_clamped_rows(case):
    index, start, end, deltas = case
    got = window(index, start, end, deltas)
    wanted = index + np.asarray(deltas, dtype=np.int64)
    assert got.indices.dtype == np.int64
    assert got.indices.shape == got.is_pad.shape == (len(deltas),)
    assert ((got.indices >= start) & (got.indices < end)).all()
    np.testing.assert_array_equal(got.is_pad, (wanted < start) | (wanted >= end))
    np.testing.assert_array_equal(got.indices[~got.is_pad], wanted[~got.is_pad])
    np.testing.assert_array_equal(got.indices[wanted < start], start)
    np.testing.assert_array_equal(got.indices[wanted >= end], end - 1)


@given(rows_in_episodes())
def test_window_matches_lerobot_query_indices(case):
    index, start, end, deltas = case
    indices, padding = lerobot_query_indices(index, start, end, deltas)
    got = window(index, start, end, deltas)
    assert got.indices.tolist() == indices
    assert got.is_pad.tolist() == padding


@given(st.lists(rows_in_episodes(), min_size=1, max_size=8), st.lists(st.integers(-20, 20)))
def test_window_batch_agrees_with_one_window_per_row(cases, deltas):
    indices, starts, ends = (np.array([c[i] for c in cases]) for i in range(3))
    batch = window_batch(indices, starts, ends, deltas)
    assert batch.indices.shape == batch.is_pad.shape == (len(cases), len(deltas))
    for row, (index, start, end, _) in enumerate(cases):
        single = window(index, start, end, deltas)
        np.testing.assert_array_equal(batch.indices[row], single.indices)
        np.testing.assert_array_equal(batch.is_pad[row], single.is_pad)


def test_window_batch_shares_scalar_episode_bounds():
    got = window_batch([10, 14], 10, 15, [-1, 0, 1])
    assert got.indices.tolist() == [[10, 10, 11], [13, 14, 14]]
    assert got.is_pad.tolist() == [[True, False, False], [False, False, True]]


def test_query_windows_gives_one_window_per_key():
    got = query_windows(3, 0, 5, {"action": [0, 1, 2], "observation.state": [-1, 0]})
    assert got["action"].indices.tolist() == [3, 4, 4]
    assert got["action"].is_pad.tolist() == [False, False, True]
    assert got["observation.state"].indices.tolist() == [2, 3]
    assert is_pad_key("action") == "action_is_pad"


@pytest.mark.parametrize(
    ("index", "start", "end"), [(5, 0, 5), (-1, 0, 5), (3, 4, 10), (0, 0, 0), (2, 3, 2)]
)
def test_window_rejects_a_row_outside_its_episode(index, start, end):
    with pytest.raises(InvalidInput):
        window(index, start, end, [0])


def test_window_batch_rejects_bounds_of_another_length():
    with pytest.raises(InvalidInput, match="episode_from has 2 entries for 3 rows"):
        window_batch([1, 2, 3], [0, 0], 10, [0])


fps_values = st.sampled_from([5, 10, 15, 24, 25, 30, 50, 60, 100, 120])


@given(fps_values, st.lists(st.integers(-200, 200), min_size=1, max_size=10))
def test_deltas_on_the_frame_grid_pass_and_become_their_frame_offsets(fps, frames):
    deltas = {"action": [f / fps for f in frames]}
    check_delta_timestamps(deltas, fps)
    assert delta_indices(deltas, fps)["action"].tolist() == frames


@given(
    fps_values,
    st.integers(-200, 200),
    st.floats(0.05, 0.95),
    st.text(st.characters(categories=["L", "N"], include_characters="._"), min_size=1),
)
def test_deltas_off_the_grid_are_rejected_naming_key_and_value(fps, frame, fraction, key):
    bad = (frame + fraction) / fps
    with pytest.raises(InvalidInput) as caught:
        check_delta_timestamps({"observation.state": [0.0], key: [0.0, bad]}, fps)
    message = str(caught.value)
    assert f"'{key}'" in message
    assert repr(bad) in message
    assert caught.value.where == f"delta_timestamps.{key}"


def test_delta_within_tolerance_passes_like_lerobot():
    check_delta_timestamps({"action": [0.1 + 5e-5]}, 10, tolerance_s=1e-4)
    with pytest.raises(InvalidInput):
        check_delta_timestamps({"action": [0.1 + 5e-4]}, 10, tolerance_s=1e-4)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_deltas_are_rejected(value):
    with pytest.raises(InvalidInput, match="action"):
        check_delta_timestamps({"action": [value]}, 30)


def test_fps_must_be_positive():
    with pytest.raises(InvalidInput, match="fps"):
        check_delta_timestamps({"action": [0.0]}, 0)


# Episode lengths of the fixtures, from their README.
FIXTURE_EPISODE_LENGTHS = {"sim_images": [12, 15], "sim_video": [20, 25, 30]}


@pytest.mark.parametrize("name", sorted(FIXTURE_EPISODE_LENGTHS))
def test_padding_masks_match_what_lerobot_returned(fixtures_dir, name):
    reference = json.loads((fixtures_dir / f"{name}.reference.json").read_text())
    arrays = np.load(fixtures_dir / f"{name}.reference.npz")
    ends = np.cumsum(FIXTURE_EPISODE_LENGTHS[name])
    starts = ends - FIXTURE_EPISODE_LENGTHS[name]
    for item in reference["items"]:
        index = item["index"]
        episode = int(np.searchsorted(ends, index, side="right"))
        windows = query_windows(
            index, int(starts[episode]), int(ends[episode]), reference["delta_timestamps_in_frames"]
        )
        for key, got in windows.items():
            np.testing.assert_array_equal(got.is_pad, arrays[f"{index}/{is_pad_key(key)}"])
        # Rows clamped to the same index hold the same action.
        actions = arrays[f"{index}/action"]
        for position, row in enumerate(windows["action"].indices):
            first = int(np.flatnonzero(windows["action"].indices == row)[0])
            np.testing.assert_array_equal(actions[position], actions[first])
