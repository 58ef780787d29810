"""GR00T N1.7's relative action statistics as the training plan asks for them: per step of the
native 40-step chunk (whatever the chunk size), refused in one message without action names or
without 2 such chunks."""

from __future__ import annotations

import numpy as np
import pytest

from rlctl.application.relative_actions import relative_action_statistics
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import MLPConfig
from rlctl.domain.policies.groot import NATIVE_ACTION_HORIZON, GrootConfig

NAMES = ("arm_0", "arm_1", "gripper")


def groot(names: tuple[str, ...] | None = NAMES) -> GrootConfig:
    return GrootConfig(
        output_features={"action": typed_feature("ACTION", (3,))},
        chunk_size=8,
        n_action_steps=8,
        use_relative_actions=True,
        relative_exclude_joints=["gripper"],
        action_feature_names=names,
    )


def columns(lengths: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    total = sum(lengths)
    episodes = np.repeat(np.arange(len(lengths)), lengths)
    return rng.normal(size=(total, 3)), rng.normal(size=(total, 4)), episodes


def test_groot_gets_one_row_per_step_of_the_native_chunk() -> None:
    assert GrootConfig.relative_stats_horizon == NATIVE_ACTION_HORIZON
    assert MLPConfig.relative_stats_horizon is None
    actions, states, episodes = columns([45, 30])
    stats = relative_action_statistics(groot(), actions, states, episodes)
    assert set(stats) == {"min", "max", "mean", "std", "q01", "q99", "count"}
    assert np.asarray(stats["mean"]).shape == (NATIVE_ACTION_HORIZON, 3)
    assert stats["count"] == [6] * NATIVE_ACTION_HORIZON  # 45 - 40 + 1 chunks, none in 30
    first = actions[:6] - np.concatenate([states[:6, :2], np.zeros((6, 1))], axis=1)
    np.testing.assert_allclose(stats["max"][0], first.max(0), rtol=1e-6)


def test_short_episodes_or_no_action_names_are_one_message() -> None:
    actions, states, episodes = columns([40, 39])
    with pytest.raises(ConfigError, match="2 such chunks") as short:
        relative_action_statistics(groot(), actions, states, episodes)
    assert "more than 40 frames" in (short.value.hint or "")
    actions, states, episodes = columns([50])
    with pytest.raises(ConfigError, match="has none"):
        relative_action_statistics(groot(names=None), actions, states, episodes)
