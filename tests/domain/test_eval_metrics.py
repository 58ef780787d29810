import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.eval_metrics import (
    EpisodeResult,
    EvalReport,
    RolloutTracker,
    TaskResult,
    aggregate,
    success_flags,
)


def test_success_from_info_with_gymnasium_masks():
    info = {
        "is_success": np.array([True, True, False]),
        "_is_success": np.array([True, False, True]),
    }
    assert success_flags(info, 3).tolist() == [True, False, False]


def test_final_info_wins_for_the_envs_that_just_ended():
    info = {
        "is_success": np.array([False, True, False]),
        "final_info": {
            "is_success": np.array([True, False, False]),
            "_is_success": np.array([True, False, False]),
        },
        "_final_info": np.array([True, False, False]),
    }
    assert success_flags(info, 3).tolist() == [True, True, False]


def test_old_gymnasium_final_info_sequence_and_missing_keys():
    info = {"final_info": [None, {"is_success": True}, {"other": 1}]}
    assert success_flags(info, 3).tolist() == [False, True, False]
    assert success_flags({}, 2).tolist() == [False, False]
    assert success_flags({"is_success": True}, 2).tolist() == [True, True]
    assert success_flags({"is_success": np.array([None, 1], dtype=object)}, 2).tolist() == [
        False,
        True,
    ]


@given(
    st.lists(st.tuples(st.integers(1, 8), st.booleans()), min_size=1, max_size=6),
    st.integers(1, 10),
)
def test_tracker_counts_each_episode_up_to_its_end(episodes, max_steps):
    n = len(episodes)
    tracker = RolloutTracker(n, max_steps)
    t = 0
    while not tracker.all_done:
        t += 1
        ended = np.array([t >= length for length, _ in episodes])
        success = np.array([t >= length and ok for length, ok in episodes])
        # After its end an env keeps paying 99: it must never be counted.
        reward = np.where(np.array([t > length for length, _ in episodes]), 99.0, float(t))
        tracker.record(reward, ended, np.zeros(n, bool), success)
    assert t == min(max(length for length, _ in episodes), max_steps)
    for i, (length, ok) in enumerate(episodes):
        steps = min(length, max_steps)
        assert tracker.length[i] == steps
        assert tracker.sum_reward[i] == sum(range(1, steps + 1))
        assert tracker.max_reward[i] == steps
        assert tracker.success[i] == (ok and length <= max_steps)


def test_aggregate_of_nothing_is_nan_and_report_sums_up():
    empty = aggregate([])
    assert empty["n_episodes"] == 0 and math.isnan(empty["pc_success"])
    a = TaskResult("s", 0, [EpisodeResult(0, 1, 1.0, 1.0, True, 3)], ["v0.mp4"])
    b = TaskResult("s", 1, [EpisodeResult(0, 1, 3.0, 2.0, False, 5)])
    info = EvalReport([a, b], eval_s=4.0).to_info()
    assert info["overall"]["avg_sum_reward"] == 2.0
    assert info["overall"]["pc_success"] == 50.0
    assert info["overall"]["eval_ep_s"] == 2.0
    assert info["overall"]["video_paths"] == ["v0.mp4"]
    assert info["per_group"]["s"]["n_episodes"] == 2


def test_tracker_rejects_empty_batches():
    with pytest.raises(Exception, match="at least one"):
        RolloutTracker(0, 5)
