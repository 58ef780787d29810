"""What a policy server answers, whatever carries it: nothing predicted from NaN or infinity, no
NaN chunk sent, observations a policy cannot read refused naming every difference, features
described as `FeatureSpec`s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.features import FeatureSpec, typed_feature
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import ChunkRequest, NonFiniteChunk

STATE = "observation.state"
CAMERA = "observation.images.front"


def service(chunker: Any = None, **config: Any) -> tuple[PolicyService, ScriptedPolicy]:
    policy = ScriptedPolicy(
        2,
        chunk_size=4,
        chunker=chunker,
        input_features={
            STATE: typed_feature("STATE", (2,), STATE),
            CAMERA: typed_feature("VISUAL", (3, 8, 8), CAMERA),
        },
    )
    return PolicyService({"p": policy}), policy


def observation(**overrides: np.ndarray) -> dict[str, np.ndarray]:
    return {
        STATE: np.zeros((1, 2), np.float32),
        CAMERA: np.zeros((1, 3, 8, 8), np.float32),
        **overrides,
    }


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("key", [STATE, CAMERA])
def test_nothing_is_predicted_from_nan_or_infinity(dtype: str, bad: float, key: str) -> None:
    served, policy = service()
    values = observation()[key].astype(dtype)
    values.flat[-1] = bad
    with pytest.raises(InvalidInput, match=f"{key} holds NaN or infinite values"):
        served.predict(ChunkRequest(observation=observation(**{key: values})))
    assert policy.predicted_from == []


def test_committed_actions_with_nan_are_refused() -> None:
    served, policy = service()
    committed = np.zeros((1, 3, 2), np.float32)
    committed[0, 1, 0] = np.nan
    request = ChunkRequest(
        observation=observation(), committed=committed, inference_delay=1, rtc=RTCConfig()
    )
    with pytest.raises(InvalidInput, match=r"rtc\.committed holds NaN"):
        served.predict(request)
    assert policy.predicted_from == []


def test_extreme_finite_observations_are_read_but_a_nan_chunk_is_never_answered() -> None:
    def overflowing(batch: Mapping[str, Any]) -> np.ndarray:
        # What a network does with 3e38 in its input: inf - inf.
        state = np.asarray(batch[STATE], np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.repeat((state * 10 - state * 10)[:, None, :], 4, axis=1)

    served, policy = service(overflowing)
    near_the_limit = np.full((1, 2), 3e38, np.float32)
    with pytest.raises(NonFiniteChunk) as raised:
        served.predict(ChunkRequest(observation=observation(**{STATE: near_the_limit})))
    assert len(policy.predicted_from) == 1  # read, answered garbage, refused
    assert "NaN or infinite actions" in raised.value.message
    assert f"{STATE} reaches 3e+38" in (raised.value.hint or "")
    reply = served.predict(ChunkRequest(observation=observation()))
    assert np.isfinite(reply.actions).all() and reply.actions.shape == (1, 4, 2)


def test_an_observation_the_policy_cannot_read_is_refused_naming_every_difference() -> None:
    served, policy = service()
    wrong = {
        "observation.velocity": np.zeros((1, 2), np.float32),
        CAMERA: np.zeros((1, 8, 8, 3), np.float32),  # channels last
    }
    with pytest.raises(FeatureMismatch) as raised:
        served.predict(ChunkRequest(observation=wrong))
    message = raised.value.message
    assert f"it reads {STATE} (2,), which the request lacks" in message
    assert f"it reads {CAMERA} as channels-first (3, 8, 8), the request has (8, 8, 3)" in message
    with pytest.raises(FeatureMismatch, match=r"as \(2,\), the request has \(2, 2\)"):
        served.predict(ChunkRequest(observation=observation(**{STATE: np.zeros((1, 2, 2))})))
    assert policy.predicted_from == []
    # A camera of another size, or missing, is the policy's to judge (some resize, some fill in).
    served.predict(ChunkRequest(observation=observation(**{CAMERA: np.zeros((1, 3, 16, 16))})))
    served.predict(ChunkRequest(observation={STATE: np.zeros((1, 2), np.float32)}))


def test_describe_speaks_feature_specs() -> None:
    served, _ = service()
    offered = {STATE: FeatureSpec(STATE, "float32", (2,))}
    description = served.describe("", offered)
    assert description.observation_features == offered
    assert all(isinstance(s, FeatureSpec) for s in description.observation_features.values())
    assert served.describe("p", None).observation_features == {}


@pytest.mark.parametrize(
    ("field", "value", "complaint"),
    [
        ("max_actions", -1, "max_actions must be between 0 and 10000, got -1"),
        ("max_actions", 10_001, "max_actions must be between 0 and 10000"),
        ("max_actions", 2.5, "max_actions must be a whole number"),
        ("max_actions", True, "max_actions must be a whole number"),
        ("timestep", -5, "timestep must be between 0"),
        ("inference_delay", -1, "inference_delay must be between 0"),
    ],
)
def test_a_request_bounds_its_counts(field: str, value: Any, complaint: str) -> None:
    with pytest.raises(InvalidInput, match=complaint) as raised:
        ChunkRequest(observation=observation(), **{field: value})
    assert raised.value.where == f"request.{field}"


def test_max_actions_zero_is_the_whole_chunk() -> None:
    served, _ = service()
    for asked, steps in ((0, 4), (2, 2), (np.int64(3), 3), (50, 4)):
        reply = served.predict(ChunkRequest(observation=observation(), max_actions=asked))
        assert reply.actions.shape == (1, steps, 2)
