"""The Gaussian actor (SAC's policy): its config as LeRobot writes it, its checkpoint round trip,
its gripper dimension, and the inputs it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.domain.config import structure, unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import PolicyConfig, lerobot_config_data
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig

TINY = {
    "latent_dim": 8,
    "image_encoder_hidden_dim": 4,
    "actor_network_kwargs": {"hidden_dims": [16]},
    "discrete_critic_network_kwargs": {"hidden_dims": [8]},
}


def config(**overrides: object) -> GaussianActorConfig:
    fields = {
        "input_features": {"observation.state": typed_feature("STATE", (3,))},
        "output_features": {"action": typed_feature("ACTION", (2,))},
        **TINY,
        **overrides,
    }
    return GaussianActorConfig(**fields)  # type: ignore[arg-type]


def stats() -> dict[str, dict[str, np.ndarray]]:
    return {
        "observation.state": {"min": -np.ones(3), "max": np.ones(3)},
        "action": {"min": np.array([-2.0, 0.0]), "max": np.array([2.0, 1.0])},
    }


def test_config_json_is_lerobots_and_reads_back() -> None:
    made = config(num_discrete_actions=3)
    data = lerobot_config_data(made)
    assert data["type"] == "gaussian_actor"
    assert "n_action_steps" not in data  # LeRobot's config has none, and refuses it
    assert data["policy_kwargs"] == {
        "use_tanh_squash": True,
        "std_min": 1e-5,
        "std_max": 10.0,
        "init_final": 0.05,
    }
    assert data["normalization_mapping"]["STATE"] == "MIN_MAX"
    back = structure(json.loads(json.dumps(data)), PolicyConfig)
    assert back == made


def test_unknown_nested_setting_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown ActorNetworkConfig setting"):
        config(actor_network_kwargs={"hidden_dim": [4]})


def test_checkpoint_round_trip_selects_the_same_actions(tmp_path: Path) -> None:
    torch.manual_seed(0)
    policy = create_policy(config(), stats())
    folder = policy.save(tmp_path / "model")
    loaded = load_policy_folder(folder)
    observation = {"observation.state": np.array([0.1, -0.4, 0.9], dtype=np.float32)}
    torch.manual_seed(5)
    first = policy.select_action(observation)
    torch.manual_seed(5)
    second = loaded.select_action(observation)
    np.testing.assert_allclose(first, second, atol=1e-6)
    # Unnormalised into the action range (tanh keeps the sample inside it).
    assert first.shape == (1, 2)
    assert -2 <= first[0, 0] <= 2 and 0 <= first[0, 1] <= 1


def test_gripper_dimension_is_the_discrete_critics_argmax_left_unnormalised() -> None:
    torch.manual_seed(0)
    policy = create_policy(config(num_discrete_actions=3), stats())
    action = policy.select_action({"observation.state": np.zeros(3, dtype=np.float32)})
    assert action.shape == (1, 3)
    assert action[0, 2] in (0.0, 1.0, 2.0)


def test_too_small_camera_is_refused_with_the_size_needed() -> None:
    small = config(
        input_features={
            "observation.state": typed_feature("STATE", (3,)),
            "observation.image": typed_feature("VISUAL", (3, 32, 32)),
        }
    )
    with pytest.raises(ConfigError, match="too small") as err:
        create_policy(small, stats())
    assert "61x61" in (err.value.hint or "")


def test_inputs_without_state_or_camera_are_refused() -> None:
    blind = config(input_features={"observation.environment_state": typed_feature("ENV", (3,))})
    with pytest.raises(ConfigError, match=r"reads 'observation\.state' or an image"):
        create_policy(blind, stats())


def test_offline_training_points_at_rl_learn() -> None:
    policy = create_policy(config(), stats())
    with pytest.raises(ConfigError) as err:
        policy.model({"observation.state": torch.zeros(1, 3)})
    assert "rlctl rl learn" in (err.value.hint or "")


def test_unstructure_keeps_nested_settings() -> None:
    data = unstructure(config(policy_kwargs={"std_max": 2.0}))
    assert data["policy_kwargs"]["std_max"] == 2.0


@pytest.mark.parametrize("shape", [(1, 1), (256, 1), (7, 6)])
def test_tanh_gaussian_sample_is_torch_distributions_bit_for_bit(shape: tuple[int, int]) -> None:
    from torch.distributions import MultivariateNormal, TanhTransform, TransformedDistribution

    from rlctl.adapters.policies.gaussian_actor import tanh_gaussian_sample

    generator = torch.Generator().manual_seed(3)
    means = (torch.randn(shape, generator=generator) * 2).requires_grad_()
    std = (torch.rand(shape, generator=generator) * 4 + 1e-5).requires_grad_()
    torch.manual_seed(11)
    dist = TransformedDistribution(
        MultivariateNormal(means, torch.diag_embed(std)), [TanhTransform(cache_size=1)]
    )
    expected = dist.rsample()
    expected_log = dist.log_prob(expected)
    expected_grads = torch.autograd.grad(expected.sum() + expected_log.sum(), [means, std])
    torch.manual_seed(11)
    actions, log_probs = tanh_gaussian_sample(means, std)
    grads = torch.autograd.grad(actions.sum() + log_probs.sum(), [means, std])
    assert torch.equal(actions, expected) and torch.equal(log_probs, expected_log)
    assert all(torch.equal(a, b) for a, b in zip(grads, expected_grads, strict=True))


def test_acting_draws_what_the_learners_sample_draws_and_stays_in_eval() -> None:
    policy = create_policy(config(), stats())
    model = policy.model
    observation = {"observation.state": torch.randn(5, 3)}
    batch = policy.preprocessor.process_batch(observation)
    torch.manual_seed(4)
    acted = model.predict_chunk(batch)[:, 0]
    assert not model.training
    torch.manual_seed(4)
    with torch.no_grad():
        sampled, _, _ = model.actor(batch)
    assert torch.equal(acted, sampled)
