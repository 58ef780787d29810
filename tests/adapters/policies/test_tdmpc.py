"""TD-MPC at tiny size: its settings' checks, acting (repeated actions, the planner's warm start
forgotten at reset), the target network's EMA step and the loss's padding (LeRobot's parity is
checked in test_tdmpc_lerobot_interop.py)."""

from __future__ import annotations

import pytest
import torch

from rlctl.adapters.policies.base import build_policy
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import lerobot_config_data
from rlctl.domain.policies.tdmpc import TDMPCConfig

TINY = {
    "horizon": 3,
    "latent_dim": 6,
    "mlp_dim": 12,
    "state_encoder_hidden_dim": 12,
    "n_gaussian_samples": 8,
    "n_pi_samples": 2,
    "n_elites": 3,
    "cem_iterations": 2,
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # Tiny models run faster on one thread than on two shared ones.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def config(**fields) -> TDMPCConfig:
    inputs = {
        "observation.state": typed_feature("STATE", (3,)),
        "observation.environment_state": typed_feature("ENV", (4,)),
    }
    return TDMPCConfig(
        **{
            "input_features": inputs,
            "output_features": {"action": typed_feature("ACTION", (2,))},
            **TINY,
            **fields,
        }
    )


def training_batch(cfg: TDMPCConfig, size: int = 3) -> dict[str, torch.Tensor]:
    steps = cfg.horizon
    pad = torch.zeros(size, steps + 1, dtype=torch.bool)
    return {
        "observation.state": torch.randn(size, steps + 1, 3),
        "observation.environment_state": torch.randn(size, steps + 1, 4),
        "action": torch.rand(size, steps, 2) * 2 - 1,
        "next.reward": torch.rand(size, steps),
        "observation.state_is_pad": pad,
        "action_is_pad": pad[:, 1:],
        "next.reward_is_pad": pad[:, 1:],
    }


def test_lerobot_defaults_and_windows() -> None:
    cfg = TDMPCConfig()
    assert (cfg.horizon, cfg.n_action_repeats, cfg.latent_dim, cfg.q_ensemble_size) == (5, 2, 50, 5)
    assert cfg.observation_delta_indices == [0, 1, 2, 3, 4, 5]
    assert cfg.action_delta_indices == cfg.reward_delta_indices == [0, 1, 2, 3, 4]
    assert cfg.normalization_mapping["ENV"] == "IDENTITY"
    assert cfg.optimizer_preset().lr == 3e-4 and cfg.scheduler_preset() is None
    assert "n_action_steps" in lerobot_config_data(cfg)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"n_gaussian_samples": 0}, "n_gaussian_samples"),
        ({"normalization_mapping": {"ACTION": "MEAN_STD"}}, "MIN_MAX"),
        ({"n_obs_steps": 2}, "one observation step"),
        ({"n_action_steps": 2}, "n_action_repeats must be 1"),
        ({"n_action_steps": 2, "n_action_repeats": 1, "use_mpc": False}, "use_mpc"),
        ({"n_action_steps": 4, "n_action_repeats": 1}, "cannot exceed horizon"),
        ({"n_elites": 11}, "n_elites"),
    ],
)
def test_settings_it_cannot_run_are_one_clear_message(fields, message) -> None:
    with pytest.raises(ConfigError, match=message):
        TDMPCConfig(**{**TINY, **fields})


def test_one_square_camera_at_most() -> None:
    with pytest.raises(ConfigError, match="square images"):
        config(input_features={"observation.image": typed_feature("VISUAL", (3, 32, 40))})
    cameras = {
        k: typed_feature("VISUAL", (3, 32, 32))
        for k in ("observation.images.a", "observation.images.b")
    }
    with pytest.raises(ConfigError, match="at most one camera"):
        config(input_features=cameras)


def test_acting_repeats_the_planned_action_and_reset_forgets_the_warm_start() -> None:
    torch.manual_seed(0)
    model = build_policy(config())
    observation = {
        "observation.state": torch.randn(2, 3),
        "observation.environment_state": torch.randn(2, 4),
    }
    chunk = model.predict_chunk(observation)
    assert chunk.shape == (2, 2, 2) and torch.equal(chunk[:, 0], chunk[:, 1])
    assert chunk.abs().max() <= 1
    assert model._prev_mean is not None
    # Another batch size plans afresh rather than failing on the old plan's shape.
    assert model.predict_chunk({k: v[:1] for k, v in observation.items()}).shape == (1, 2, 2)
    model.reset()
    assert model._prev_mean is None
    steps = build_policy(config(n_action_steps=3, n_action_repeats=1))
    assert steps.predict_chunk(observation).shape == (2, 3, 2)
    assert steps.action_buffer().n_action_steps == 3


def test_the_target_follows_the_model_by_ema() -> None:
    model = build_policy(config(target_model_momentum=0.9))
    target = model.model_target._pi[0].weight
    assert torch.equal(target, model.model._pi[0].weight)
    assert not any(p.requires_grad for p in model.model_target.parameters())
    before = target.clone()
    with torch.no_grad():
        model.model._pi[0].weight.add_(1.0)
    model.after_optimizer_step()
    assert torch.allclose(target, before + 0.1)


def test_padded_steps_count_for_nothing_and_gradients_skip_the_target() -> None:
    torch.manual_seed(0)
    cfg = config()
    model = build_policy(cfg).train()
    batch = training_batch(cfg)
    loss, parts = model(batch)
    loss.backward()
    assert {"consistency_loss", "reward_loss", "Q_value_loss", "V_value_loss", "pi_loss"} <= set(
        parts
    )
    assert all(p.grad is None for p in model.model_target.parameters())
    # A sample whose every step pads adds nothing: its rewards do not matter.
    padded = dict(batch)
    padded["observation.state_is_pad"] = batch["observation.state_is_pad"].clone()
    padded["observation.state_is_pad"][0] = True
    changed = dict(padded)
    changed["next.reward"] = batch["next.reward"].clone()
    changed["next.reward"][0] += 100.0
    torch.manual_seed(1)
    first, _ = model(padded)
    torch.manual_seed(1)
    second, _ = model(changed)
    assert first.item() == pytest.approx(second.item())


def test_a_batch_without_rewards_is_refused() -> None:
    cfg = config()
    batch = training_batch(cfg)
    del batch["next.reward"]
    with pytest.raises(Exception, match="learns from rewards"):
        build_policy(cfg)(batch)
