import numpy as np
import pytest

from rlctl.domain.env_observation import (
    env_policy_features,
    flatten_observation,
    policy_key,
    to_policy_observation,
)
from rlctl.domain.features import FeatureSpec


def test_nested_pixels_and_conventional_names():
    raw = {
        "pixels": {"top": np.zeros((2, 6, 8, 3), np.uint8)},
        "agent_pos": np.ones((2, 14)),
        "extra": np.arange(4).reshape(2, 2),
    }
    out = to_policy_observation(raw)
    assert set(out) == {"observation.images.top", "observation.state", "observation.extra"}
    assert out["observation.images.top"].shape == (2, 3, 6, 8)
    assert out["observation.state"].dtype == np.float32
    assert out["observation.extra"].dtype == np.float32


def test_images_become_channel_first_floats_in_unit_range():
    image = np.random.default_rng(0).integers(0, 256, (1, 4, 5, 3), dtype=np.uint8)
    out = to_policy_observation({"pixels": image})["observation.image"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0, 2], image[0, :, :, 2] / 255.0, rtol=1e-6)


def test_the_feature_map_wins_and_collisions_are_refused():
    assert policy_key("top", {"top": "observation.images.cam"}) == "observation.images.cam"
    assert policy_key("pixels/wrist", {}) == "observation.images.wrist"
    assert flatten_observation({"a": {"b": {"c": 1}}}) == {"a/b/c": 1}
    with pytest.raises(Exception, match=r"observation\.state"):
        to_policy_observation(
            {"agent_pos": np.zeros((1, 2)), "s": np.zeros((1, 2))}, {"s": "observation.state"}
        )


def test_declared_env_features_as_the_policy_sees_them():
    features = {
        "agent_pos": FeatureSpec("agent_pos", "float32", (2,)),
        "pixels/top": FeatureSpec("pixels/top", "video", (480, 640, 3)),
        "action": FeatureSpec("action", "float32", (14,)),
    }
    out = env_policy_features(features, {"pixels/top": "observation.images.top"})
    assert set(out) == {"observation.state", "observation.images.top"}
    assert out["observation.images.top"].shape == (3, 480, 640)
    assert out["observation.images.top"].is_visual
    assert out["observation.state"].shape == (2,)
    # The same keys and layout the observations themselves take.
    raw = {"agent_pos": np.zeros((1, 2)), "pixels": {"top": np.zeros((1, 480, 640, 3), np.uint8)}}
    batch = to_policy_observation(raw, {"pixels/top": "observation.images.top"})
    assert {k: v.shape[1:] for k, v in batch.items()} == {k: s.shape for k, s in out.items()}
