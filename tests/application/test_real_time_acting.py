"""Real-time chunking in the acting loop, with a scripted policy: each chunk is asked for with
the leftover of the one executing and the inference delay, the delayed ticks keep the old
chunk's actions, and `--policy.rtc_config.*` reaches the loader through the container."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from dependency_injector import providers

from rlctl.adapters.memory.policy import InMemoryPolicyLoader, ScriptedPolicy
from rlctl.domain.config import resolve
from rlctl.domain.eval_settings import EvalPolicySettings
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.entrypoints.container import build_container

CHUNK, DIM = 10, 2


def numbered() -> Any:
    """Chunk k's action i is 100 k + i (every dimension), so a misplaced action shows."""
    calls = {"n": 0}

    def chunker(batch: Mapping[str, Any]) -> np.ndarray:
        k = calls["n"]
        calls["n"] += 1
        values = 100.0 * k + np.arange(CHUNK, dtype=np.float32)
        return np.repeat(values[None, :, None], DIM, axis=2)

    return chunker


def run(policy: ScriptedPolicy, ticks: int) -> list[float]:
    state = {"observation.state": np.zeros((1, DIM), np.float32)}
    return [float(policy.select_action(state)[0, 0]) for _ in range(ticks)]


@pytest.mark.parametrize("delay", [0, 2])
def test_each_chunk_follows_the_leftover_and_the_delayed_ticks_keep_the_old_chunk(
    delay: int,
) -> None:
    rtc = RTCConfig(execution_horizon=3)
    policy = ScriptedPolicy(
        DIM, chunk_size=CHUNK, n_action_steps=6, chunker=numbered(), rtc=rtc, rtc_delay=delay
    )
    executed = run(policy, 18)
    assert len(policy.committed) == 3
    assert policy.committed[0] is None  # the episode's first chunk has nothing to follow
    for k, committed in enumerate(policy.committed[1:]):
        assert committed is not None
        assert committed.inference_delay == delay and committed.rtc == rtc
        # What chunk k planned for the next ticks, from the tick the observation is taken at.
        np.testing.assert_array_equal(committed.actions[0, :, 0], 100.0 * k + np.arange(6, 9))
    # Six ticks a chunk; the first `delay` ticks after a prediction still act on the old chunk.
    first = list(range(6))
    later = [
        [100.0 * k + i if i >= delay else 100.0 * (k - 1) + 6 + i for i in range(6)] for k in (1, 2)
    ]
    assert executed == first + later[0] + later[1]


def test_a_new_episode_starts_without_a_leftover() -> None:
    policy = ScriptedPolicy(
        DIM,
        chunk_size=CHUNK,
        n_action_steps=4,
        chunker=numbered(),
        rtc=RTCConfig(execution_horizon=3),
    )
    run(policy, 5)
    policy.reset()
    run(policy, 1)
    assert [c is None for c in policy.committed] == [True, False, True]


def test_a_chunk_served_to_its_end_leaves_the_horizon_to_follow() -> None:
    # n_action_steps = chunk_size would leave nothing: RTC serves chunk - horizon ticks a chunk.
    policy = ScriptedPolicy(
        DIM,
        chunk_size=CHUNK,
        n_action_steps=CHUNK,
        chunker=numbered(),
        rtc=RTCConfig(execution_horizon=4),
    )
    run(policy, 7)
    committed = policy.committed[1]
    assert committed is not None
    np.testing.assert_array_equal(committed.actions[0, :, 0], [6, 7, 8, 9])


def test_without_rtc_no_leftover_is_ever_passed() -> None:
    policy = ScriptedPolicy(DIM, chunk_size=CHUNK, n_action_steps=6, chunker=numbered())
    assert run(policy, 12) == list(range(6)) + [100.0 + i for i in range(6)]
    assert policy.committed == [None, None]


def test_the_command_lines_rtc_settings_reach_the_loader() -> None:
    settings = resolve(
        EvalPolicySettings,
        {},
        overrides=[
            ("path", "runs/smolvla"),
            ("rtc_config.enabled", True),
            ("rtc_config.execution_horizon", 8),
            ("rtc_inference_delay", 3),
        ],
    )
    assert settings.rtc_config == RTCConfig(execution_horizon=8)
    stored = ScriptedPolicy(DIM)
    loader = InMemoryPolicyLoader({"runs/smolvla": stored})
    c = build_container()
    c.policy_loader.override(providers.Object(loader))
    assert c.eval_policy(settings, simulation=None, seed=0) is stored
    assert loader.loads == [
        {
            "location": "runs/smolvla",
            "device": None,
            "rtc": RTCConfig(execution_horizon=8),
            "rtc_delay": 3,
        }
    ]
