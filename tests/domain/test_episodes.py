"""Episodes and finding the one that holds a global row."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.episodes import Episode, EpisodeIndex, locate_episode
from rlctl.domain.errors import InvalidInput
from rlctl.domain.statistics import compute_stats


@st.composite
def episode_runs(draw):
    """Sorted episodes with optional gaps between them (a selection of a dataset's episodes)."""
    lengths = draw(st.lists(st.integers(1, 12), min_size=1, max_size=8))
    gaps = draw(st.lists(st.integers(0, 5), min_size=len(lengths), max_size=len(lengths)))
    episodes, row = [], 0
    for position, (length, gap) in enumerate(zip(lengths, gaps)):
        row += gap
        episodes.append(Episode(position * 2, length, ("task",), row, row + length))
        row += length
    return episodes


@given(episode_runs())
def test_every_row_is_found_in_its_episode_and_no_other_row_is(episodes):
    index = EpisodeIndex.of(episodes)
    owner = {row: e for e in episodes for row in range(e.dataset_from_index, e.dataset_to_index)}
    last = episodes[-1].dataset_to_index
    for row in range(-2, last + 3):
        if row in owner:
            assert locate_episode(episodes, row) is owner[row]
            assert index.locate(row) is owner[row]
        else:
            with pytest.raises(InvalidInput, match=f"row {row} belongs to none"):
                locate_episode(episodes, row)
            with pytest.raises(InvalidInput):
                index.locate(row)
    rows = np.array(sorted(owner))
    positions = index.positions(rows)
    assert [episodes[p] for p in positions] == [owner[r] for r in rows]
    assert index.total_rows == len(owner)


@given(episode_runs())
def test_frame_and_global_indices_are_inverse(episodes):
    for episode in episodes:
        for frame in range(episode.length):
            row = episode.global_index(frame)
            assert episode.contains(row)
            assert episode.frame_index(row) == frame


def test_episode_checks_its_row_range():
    with pytest.raises(InvalidInput, match="length 4 disagrees"):
        Episode(0, 4, (), 10, 13)
    with pytest.raises(InvalidInput, match="not a range"):
        Episode(0, 0, (), 10, 9)
    with pytest.raises(InvalidInput, match=">= 0"):
        Episode(-1, 1, (), 0, 1)
    episode = Episode(3, 2, "pick", 5, 7)
    assert episode.tasks == ("pick",)
    with pytest.raises(InvalidInput, match="episode 3"):
        episode.frame_index(7)
    with pytest.raises(InvalidInput):
        episode.global_index(2)


def test_episode_carries_its_stats():
    stats = {"action": compute_stats(np.arange(6.0).reshape(3, 2))}
    episode = Episode(0, 3, ["a", "b"], 0, 3).with_stats(stats)
    assert episode.stats is not None
    assert episode.stats["action"].count == 3


def test_index_rejects_overlapping_or_unsorted_episodes():
    with pytest.raises(InvalidInput, match="episode 1 starts at row 2"):
        EpisodeIndex.of([Episode(0, 3, (), 0, 3), Episode(1, 2, (), 2, 4)])
    with pytest.raises(InvalidInput) as caught:
        EpisodeIndex.of([Episode(1, 2, (), 5, 7), Episode(0, 3, (), 0, 3)])
    assert caught.value.hint is not None
    assert "sorted" in caught.value.hint


def test_locating_in_no_episodes_says_so():
    with pytest.raises(InvalidInput, match="without episodes"):
        locate_episode([], 0)
    with pytest.raises(InvalidInput, match="without episodes"):
        EpisodeIndex.of([]).locate(0)
