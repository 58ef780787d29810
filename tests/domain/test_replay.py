"""The learner's replay: a ring that keeps the newest transitions, interventions weighed twice,
batches mixed online/offline as LeRobot mixes them, demonstrations turned into transitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.domain.errors import InvalidInput
from rlctl.domain.rl.replay import (
    Replay,
    ReplayBuffer,
    RLTransition,
    demonstration_transitions,
    episode_report,
    random_shift_images,
    stack,
)


def transition(i: int, *, intervention: bool = False, reward: float | None = None) -> RLTransition:
    """Transition `i`: its reward is its id, its state says it too."""
    state = {"observation.state": np.full(2, i, dtype=np.float32)}
    return RLTransition(
        state=state,
        action=np.array([i, -i], dtype=np.float32),
        reward=float(i) if reward is None else reward,
        next_state={"observation.state": np.full(2, i + 1, dtype=np.float32)},
        done=i % 5 == 4,
        truncated=False,
        is_intervention=intervention,
    )


@settings(max_examples=60, deadline=None)
@given(capacity=st.integers(1, 12), sizes=st.lists(st.integers(0, 15), max_size=6))
def test_the_ring_keeps_the_newest_transitions_in_order(capacity: int, sizes: list[int]) -> None:
    buffer = ReplayBuffer(capacity)
    added: list[int] = []
    for size in sizes:
        ids = list(range(len(added), len(added) + size))
        if ids:
            buffer.extend(stack([transition(i) for i in ids]))
        added += ids
    kept = added[-capacity:] if added else []
    assert len(buffer) == len(kept)
    arrays = buffer.arrays()
    assert list(arrays.get("reward", np.array([]))) == kept
    if kept:
        np.testing.assert_array_equal(arrays["next_state.observation.state"][:, 0], np.add(kept, 1))
        back = ReplayBuffer.from_arrays(capacity, arrays)
        assert list(back.arrays()["reward"]) == kept


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 30),
    capacity=st.integers(1, 20),
    batch=st.integers(1, 40),
    seed=st.integers(0, 99),
)
def test_samples_come_from_what_is_stored(n: int, capacity: int, batch: int, seed: int) -> None:
    buffer = ReplayBuffer(capacity)
    buffer.extend(stack([transition(i) for i in range(n)]))
    sample = buffer.sample(batch, np.random.default_rng(seed))
    assert len(sample) == min(batch, len(buffer))
    stored = set(buffer.arrays()["reward"].tolist())
    assert set(sample.reward.tolist()) <= stored
    # Each row stays whole: its state, action and next state belong to the same transition.
    np.testing.assert_array_equal(sample.state["observation.state"][:, 0], sample.reward)
    np.testing.assert_array_equal(sample.action[:, 0], sample.reward)
    np.testing.assert_array_equal(sample.next_state["observation.state"][:, 0], sample.reward + 1)


@settings(max_examples=40, deadline=None)
@given(flags=st.lists(st.booleans(), min_size=1, max_size=25), with_demos=st.booleans())
def test_interventions_go_to_the_demonstrations_too(flags: list[bool], with_demos: bool) -> None:
    offline = ReplayBuffer(100) if with_demos else None
    if offline is not None:
        offline.extend(stack([transition(1000 + i) for i in range(3)]))
    replay = Replay(ReplayBuffer(100), offline)
    kept = replay.add(transition(i, intervention=f) for i, f in enumerate(flags))
    assert kept == len(flags) == len(replay.online)
    if offline is not None:
        interventions = [i for i, f in enumerate(flags) if f]
        assert list(offline.arrays()["reward"][3:]) == interventions
        assert offline.arrays()["is_intervention"][3:].all()


def test_non_finite_transitions_are_skipped_and_counted() -> None:
    replay = Replay(ReplayBuffer(10))
    bad_state = RLTransition(
        state={"observation.state": np.array([np.nan, 0], dtype=np.float32)},
        action=np.zeros(2, dtype=np.float32),
        reward=0.0,
        next_state={"observation.state": np.zeros(2, dtype=np.float32)},
        done=False,
        truncated=False,
    )
    assert replay.add([transition(0), bad_state, transition(1, reward=float("inf"))]) == 1
    assert replay.skipped == 2 and len(replay.online) == 1


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 64), ratio=st.floats(0, 1), seed=st.integers(0, 50))
def test_a_batch_mixes_online_and_demonstrations_by_the_ratio(
    batch: int, ratio: float, seed: int
) -> None:
    online, offline = ReplayBuffer(50), ReplayBuffer(50)
    online.extend(stack([transition(i) for i in range(20)]))
    offline.extend(stack([transition(100 + i) for i in range(20)]))
    replay = Replay(online, offline, online_ratio=ratio)
    sample = replay.sample(batch, np.random.default_rng(seed))
    n_online = max(1, int(batch * ratio))
    # Each buffer gives at most what it holds (20 here), as LeRobot's does.
    assert int((sample.reward < 100).sum()) == min(n_online, 20)
    assert int((sample.reward >= 100).sum()) == min(max(batch - n_online, 0), 20)


def test_without_demonstrations_a_batch_is_all_online() -> None:
    replay = Replay(ReplayBuffer(50), None, online_ratio=0.5)
    replay.add(transition(i) for i in range(30))
    assert len(replay.sample(16, np.random.default_rng(0))) == 16


def test_online_ratio_outside_zero_one_is_refused() -> None:
    with pytest.raises(InvalidInput, match="online_ratio"):
        Replay(ReplayBuffer(5), online_ratio=1.5)


@settings(max_examples=50, deadline=None)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=5), with_done=st.booleans())
def test_demonstrations_become_transitions_within_their_episodes(
    lengths: list[int], with_done: bool
) -> None:
    episodes = np.concatenate([np.full(n, e) for e, n in enumerate(lengths)])
    frames = np.arange(len(episodes), dtype=np.float32)
    last = np.zeros(len(episodes), dtype=bool)
    last[np.cumsum(lengths) - 1] = True
    batch = demonstration_transitions(
        {"observation.state": frames[:, None]},
        actions=frames[:, None],
        rewards=last.astype(np.float32),
        episode_index=episodes,
        dones=last if with_done else None,
    )
    np.testing.assert_array_equal(batch.done.astype(bool), last)
    np.testing.assert_array_equal(batch.truncated, batch.done)
    expected_next = np.where(last, frames, frames + 1)
    np.testing.assert_array_equal(batch.next_state["observation.state"][:, 0], expected_next)
    assert not batch.is_intervention.any()


def test_a_demonstration_of_other_features_is_refused_when_mixed() -> None:
    online = ReplayBuffer(5)
    online.add(transition(0))
    with pytest.raises(InvalidInput, match="do not fit"):
        online.add(
            RLTransition(
                state={"observation.image": np.zeros((3, 4, 4), dtype=np.float32)},
                action=np.zeros(2, dtype=np.float32),
                reward=0.0,
                next_state={"observation.image": np.zeros((3, 4, 4), dtype=np.float32)},
                done=False,
                truncated=False,
            )
        )


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), pad=st.integers(0, 3))
def test_image_shift_is_a_window_of_the_edge_padded_image(seed: int, pad: int) -> None:
    rng = np.random.default_rng(seed)
    images = rng.uniform(size=(3, 2, 6, 5)).astype(np.float32)
    batch = stack(
        [
            RLTransition(
                state={"observation.image": im, "observation.state": np.zeros(1, np.float32)},
                action=np.zeros(1, dtype=np.float32),
                reward=0.0,
                next_state={"observation.image": im, "observation.state": np.zeros(1, np.float32)},
                done=False,
                truncated=False,
            )
            for im in images
        ]
    )
    shifted = random_shift_images(batch, np.random.default_rng(seed), pad=pad)
    np.testing.assert_array_equal(
        shifted.state["observation.state"], batch.state["observation.state"]
    )
    for i, image in enumerate(shifted.state["observation.image"]):
        padded = np.pad(images[i], ((0, 0), (pad, pad), (pad, pad)), mode="edge")
        windows = [
            padded[:, top : top + 6, left : left + 5]
            for top in range(2 * pad + 1)
            for left in range(2 * pad + 1)
        ]
        assert any(np.array_equal(image, w) for w in windows)


def test_episode_report_is_lerobots_interaction_message() -> None:
    report = episode_report([1.0, 0.5, 0.0, 0.0], [False, True, True, False], 41)
    assert report == {
        "Episodic reward": 1.5,
        "Interaction step": 41,
        "Episode intervention": 1,
        "Intervention rate": 0.5,
    }
