"""Real-time chunking's settings and schedule: LeRobot's field names and values, and the prefix
weights' shape for every delay and horizon."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.config import structure, unstructure
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.policies import PolicyConfig, SmolVLAConfig, lerobot_config_data
from rlctl.domain.policies.rtc import SCHEDULES, CommittedActions, RTCConfig, prefix_weights

# What LeRobot 0.6.1 writes for `rtc_config` in a SmolVLA config.json (draccus, enum values).
LEROBOT_RTC = {
    "enabled": True,
    "prefix_attention_schedule": "LINEAR",
    "max_guidance_weight": 10.0,
    "execution_horizon": 10,
    "debug": False,
    "debug_maxlen": 100,
}


def test_defaults_are_lerobots() -> None:
    assert unstructure(RTCConfig()) == LEROBOT_RTC


def test_a_smolvla_config_json_with_rtc_config_loads_and_writes_it_back() -> None:
    data = lerobot_config_data(SmolVLAConfig())
    data["rtc_config"] = {**LEROBOT_RTC, "execution_horizon": 7, "prefix_attention_schedule": "EXP"}
    config = structure(json.loads(json.dumps(data)), PolicyConfig)
    assert isinstance(config, SmolVLAConfig)
    assert config.rtc_config == RTCConfig(execution_horizon=7, prefix_attention_schedule="EXP")
    assert lerobot_config_data(config) == data
    assert SmolVLAConfig.supports_rtc and not PolicyConfig.supports_rtc


def test_schedule_names_are_case_insensitive_and_checked() -> None:
    assert RTCConfig(prefix_attention_schedule="ones").prefix_attention_schedule == "ONES"
    with pytest.raises(ConfigError, match="prefix_attention_schedule"):
        RTCConfig(prefix_attention_schedule="cosine")


@pytest.mark.parametrize(
    "bad", [{"max_guidance_weight": 0.0}, {"execution_horizon": 0}, {"debug_maxlen": 0}]
)
def test_bad_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RTCConfig(**bad)  # type: ignore[arg-type]


def test_an_unknown_rtc_setting_is_named() -> None:
    with pytest.raises(ConfigError, match="horizon_steps"):
        SmolVLAConfig(rtc_config={"horizon_steps": 3})  # type: ignore[arg-type]


def test_committed_actions_are_batched_chunks() -> None:
    assert CommittedActions(actions=np.zeros((2, 5, 3))).steps == 5
    with pytest.raises(InvalidInput):
        CommittedActions(actions=np.zeros((5, 3)))
    with pytest.raises(InvalidInput):
        CommittedActions(actions=np.zeros((1, 5, 3)), inference_delay=-1)


def test_linear_weights_match_lerobots_example() -> None:
    # LeRobot: ones for the delay, linspace(1, 0, n + 2)[1:-1] up to the horizon, zeros after.
    weights = prefix_weights("LINEAR", 2, 6, 10)
    np.testing.assert_allclose(weights, [1, 1, 0.8, 0.6, 0.4, 0.2, 0, 0, 0, 0], atol=1e-6)


@given(
    schedule=st.sampled_from(SCHEDULES),
    delay=st.integers(0, 60),
    horizon=st.integers(1, 60),
    total=st.integers(1, 60),
)
def test_weights_are_full_on_the_delay_zero_past_the_horizon_and_never_rise(
    schedule: str, delay: int, horizon: int, total: int
) -> None:
    weights = prefix_weights(schedule, delay, horizon, total)
    assert weights.shape == (total,) and weights.dtype == np.float32
    assert ((weights >= 0) & (weights <= 1)).all()
    assert (np.diff(weights) <= 1e-7).all()
    assert (weights[: min(delay, horizon)] == 1).all()
    assert (weights[horizon:] == 0).all()
    if schedule == "ZEROS":
        assert (weights[min(delay, horizon) :] == 0).all()
    if schedule == "ONES":
        assert (weights[:horizon] == 1).all()
