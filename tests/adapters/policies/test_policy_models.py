"""Shapes and losses of each policy on tiny configs; the MLP overfits a handful of frames."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.act import ACTPolicy, TemporalEnsembler
from rlctl.adapters.policies.base import PolicyModel, build_policy, policy_class
from rlctl.adapters.policies.diffusion import DiffusionPolicy
from rlctl.adapters.policies.loaded_policy import LoadedPolicy
from rlctl.adapters.policies.mlp import MLPPolicy
from rlctl.domain.config import structure
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import (
    ACTConfig,
    DiffusionConfig,
    MLPConfig,
    PolicyConfig,
    RandomPolicyConfig,
    policy_config_class,
)
from rlctl.domain.processors import ProcessorPipeline

STATE, ENV, ACTION_DIM, BATCH = 4, 3, 2, 3
INPUTS = {
    "observation.state": typed_feature("STATE", (STATE,)),
    "observation.environment_state": typed_feature("ENV", (ENV,)),
}
OUTPUTS = {"action": typed_feature("ACTION", (ACTION_DIM,))}
IMAGE = {"observation.images.top": typed_feature("VISUAL", (3, 32, 32))}


def tiny_act(**overrides) -> ACTConfig:
    fields = dict(
        input_features=INPUTS, output_features=OUTPUTS, chunk_size=4, n_action_steps=4,
        dim_model=16, n_heads=2, dim_feedforward=32, n_encoder_layers=1, n_vae_encoder_layers=1,
        latent_dim=4, pretrained_backbone_weights=None,
    )  # fmt: skip
    return ACTConfig(**{**fields, **overrides})


def tiny_diffusion(**overrides) -> DiffusionConfig:
    fields = dict(
        input_features=INPUTS, output_features=OUTPUTS, n_obs_steps=2, horizon=8,
        n_action_steps=4, down_dims=(8, 16), kernel_size=3, n_groups=4,
        diffusion_step_embed_dim=8, num_inference_steps=3, pretrained_backbone_weights=None,
        spatial_softmax_num_keypoints=4, crop_shape=(24, 24),
    )  # fmt: skip
    return DiffusionConfig(**{**fields, **overrides})


def tiny_mlp(**overrides) -> MLPConfig:
    fields = dict(input_features=INPUTS, output_features=OUTPUTS, chunk_size=3, n_action_steps=2)
    return MLPConfig(**{**fields, **overrides}, hidden_dims=(32, 32))


def observation(steps: int | None = None, images: bool = False) -> dict[str, torch.Tensor]:
    lead = (BATCH,) if steps is None else (BATCH, steps)
    out = {
        "observation.state": torch.randn(*lead, STATE),
        "observation.environment_state": torch.randn(*lead, ENV),
    }
    if images:
        out["observation.images.top"] = torch.rand(*lead, 3, 32, 32)
    return out


def training_batch(horizon: int, steps: int | None = None, images: bool = False) -> dict:
    batch = observation(steps, images)
    batch["action"] = torch.randn(BATCH, horizon, ACTION_DIM)
    is_pad = torch.zeros(BATCH, horizon, dtype=torch.bool)
    is_pad[0, -1] = True
    batch["action_is_pad"] = is_pad
    return batch


def assert_trains(model: torch.nn.Module, batch: dict) -> None:
    model.train()
    loss, parts = model(batch)
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert parts and all(isinstance(v, float) for v in parts.values())
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert any(g is not None and g.abs().sum() > 0 for g in grads)


def test_policy_types_resolve_to_their_models() -> None:
    assert policy_class(ACTConfig()) is ACTPolicy
    assert policy_class(DiffusionConfig()) is DiffusionPolicy
    assert policy_class(MLPConfig()) is MLPPolicy
    with pytest.raises(ConfigError, match="unknown policy type") as caught:
        policy_config_class("pi0-nonexistent")
    assert "act" in (caught.value.hint or "")
    with pytest.raises(ConfigError, match="not a trainable model") as caught:
        policy_class(RandomPolicyConfig())
    assert "mlp" in (caught.value.hint or "")


@pytest.mark.parametrize(
    "images", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["env-state", "camera"]
)
def test_act_shapes_and_loss(images: bool) -> None:
    torch.manual_seed(0)
    inputs = {**INPUTS, **IMAGE} if images else INPUTS
    model = build_policy(tiny_act(input_features=inputs))
    batch = training_batch(4, images=images)
    assert_trains(model, batch)
    _, parts = model(batch)
    assert set(parts) == {"l1_loss", "kld_loss"}
    chunk = model.predict_chunk(observation(images=images))
    assert chunk.shape == (BATCH, 4, ACTION_DIM)
    assert not model.training


def test_act_without_vae_needs_no_actions_and_has_no_kl() -> None:
    model = build_policy(tiny_act(use_vae=False))
    _, parts = model(training_batch(4))
    assert set(parts) == {"l1_loss"}


def test_act_in_training_mode_asks_for_actions() -> None:
    model = build_policy(tiny_act()).train()
    with pytest.raises(InvalidInput, match="target actions"):
        model(observation())


def test_act_backbone_has_its_own_learning_rate() -> None:
    model = build_policy(tiny_act(input_features={**INPUTS, **IMAGE}, optimizer_lr_backbone=0.5))
    rest, backbone = model.parameter_groups()
    assert backbone["lr"] == 0.5 and "lr" not in rest
    n_params = sum(1 for p in model.parameters() if p.requires_grad)
    assert len(rest["params"]) + len(backbone["params"]) == n_params


def test_temporal_ensemble_averages_every_prediction_of_a_tick() -> None:
    coeff, chunk = 0.5, 3
    ensembler = TemporalEnsembler(coeff, chunk)
    steps = torch.arange(chunk, dtype=torch.float32).view(1, chunk, 1)
    chunks = [float(i) + steps for i in range(4)]
    actions = [ensembler.update(c) for c in chunks]
    # Tick 2 was predicted by chunk 0 (position 2), chunk 1 (position 1), chunk 2 (position 0),
    # oldest first, with weights exp(-coeff * i).
    predictions = torch.tensor([0.0 + 2, 1.0 + 1, 2.0 + 0])
    weights = torch.exp(-coeff * torch.arange(3.0))
    expected = (predictions * weights).sum() / weights.sum()
    assert torch.allclose(actions[2].squeeze(), expected)
    assert torch.allclose(actions[0].squeeze(), torch.tensor(0.0))


def acting(model: PolicyModel) -> LoadedPolicy:
    """The model as eval and record drive it, between identity processors."""
    return LoadedPolicy(model, ProcessorPipeline(), ProcessorPipeline())


def test_act_with_temporal_ensembling_selects_one_action_per_tick() -> None:
    model = build_policy(tiny_act(temporal_ensemble_coeff=0.01, n_action_steps=1))
    policy, obs = acting(model), observation()
    chunks = []
    predict = model.predict_chunk
    model.predict_chunk = lambda batch, noise=None: chunks.append(predict(batch)) or chunks[-1]
    assert policy.select_action(obs).shape == (BATCH, ACTION_DIM)
    second = policy.select_action(obs)
    assert len(chunks) == 2  # a chunk every tick
    expected = TemporalEnsembler(0.01, 4)
    expected.update(chunks[0])
    assert np.allclose(second, expected.update(chunks[1]).numpy(), atol=1e-6)
    policy.reset()
    assert len(chunks) == 2 and policy.select_action(obs).shape == (BATCH, ACTION_DIM)
    assert np.allclose(policy.select_action(obs), second, atol=1e-6)


@pytest.mark.parametrize("scheduler", ["DDIM", "DDPM"])
def test_diffusion_shapes_and_loss(scheduler: str) -> None:
    torch.manual_seed(0)
    model = build_policy(tiny_diffusion(noise_scheduler_type=scheduler))
    assert_trains(model, training_batch(8, steps=2))
    obs = observation(steps=2)
    noise = torch.randn(BATCH, 8, ACTION_DIM)
    chunk = model.predict_chunk(obs, noise=noise)
    assert chunk.shape == (BATCH, 4, ACTION_DIM)
    if scheduler == "DDIM":  # deterministic given the initial noise
        assert torch.equal(chunk, model.predict_chunk(obs, noise=noise))
    else:  # DDPM adds noise at each step: reproducible with a seeded generator
        first = model.predict_chunk(obs, generator=torch.Generator().manual_seed(1))
        again = model.predict_chunk(obs, generator=torch.Generator().manual_seed(1))
        assert torch.equal(first, again)


@pytest.mark.slow  # a ResNet-18 forward and backward
def test_diffusion_with_a_camera_trains_and_samples() -> None:
    torch.manual_seed(0)
    config = tiny_diffusion(
        input_features={**INPUTS, **IMAGE}, use_group_norm=True, n_obs_steps=1, horizon=4,
        n_action_steps=2, use_separate_rgb_encoder_per_camera=False,
    )  # fmt: skip
    model = build_policy(config)
    assert_trains(model, training_batch(4, steps=1, images=True))
    # A single step may come without its time axis.
    assert model.predict_chunk(observation(images=True)).shape == (BATCH, 2, ACTION_DIM)


def test_diffusion_refuses_noise_of_the_wrong_shape() -> None:
    model = build_policy(tiny_diffusion())
    with pytest.raises(InvalidInput, match="initial noise"):
        model.predict_chunk(observation(steps=2), noise=torch.zeros(BATCH, 7, ACTION_DIM))
    with pytest.raises(InvalidInput, match="observation steps"):
        model.predict_chunk(observation(steps=3))


def test_diffusion_select_action_keeps_a_history() -> None:
    model = build_policy(tiny_diffusion())
    policy, obs = acting(model), observation()
    actions = [policy.select_action(obs) for _ in range(5)]  # 4 from one chunk, then a new chunk
    assert all(a.shape == (BATCH, ACTION_DIM) for a in actions)


def test_diffusion_runs_a_chunk_the_horizon_cuts_short_as_lerobot_does() -> None:
    # horizon 8 - n_obs_steps 2 + 1 leaves 7 actions for n_action_steps 8 (LeRobot accepts it).
    model = build_policy(tiny_diffusion(n_action_steps=8))
    obs = observation(steps=2)
    assert model.predict_chunk(obs).shape == (BATCH, 7, ACTION_DIM)
    policy = acting(model)
    actions = [policy.select_action(observation()) for _ in range(8)]  # 7, then a new chunk
    assert all(a.shape == (BATCH, ACTION_DIM) for a in actions)


def test_a_config_check_names_its_setting() -> None:
    with pytest.raises(ConfigError) as caught:
        structure({"type": "diffusion", "horizon": 10}, PolicyConfig)
    assert str(caught.value).startswith("policy.horizon: horizon (10) must be a multiple")
    assert caught.value.hint is None  # not the generic one about key names and types


def test_configs_check_what_the_models_need() -> None:
    with pytest.raises(ConfigError, match="horizon"):
        tiny_diffusion(horizon=6)
    with pytest.raises(ConfigError, match="n_action_steps"):
        tiny_act(n_action_steps=5)
    with pytest.raises(ConfigError, match="image or an environment state"):
        build_policy(tiny_act(input_features={"observation.state": INPUTS["observation.state"]}))


def test_mlp_overfits_a_handful_of_frames() -> None:
    torch.manual_seed(0)
    model = build_policy(tiny_mlp())
    batch = training_batch(3)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    losses = []
    for _ in range(60):
        loss, _ = model(batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.05 * losses[0]
    chunk = model.predict_chunk(batch)
    valid = ~batch["action_is_pad"]
    assert torch.allclose(chunk[valid], batch["action"][valid], atol=0.1)


def test_mlp_reads_a_history_and_queues_its_chunk() -> None:
    model = build_policy(tiny_mlp(n_obs_steps=2))
    assert model.predict_chunk(observation(steps=2)).shape == (BATCH, 3, ACTION_DIM)
    obs = observation()
    policy = acting(model)
    first, second = policy.select_action(obs), policy.select_action(obs)
    chunk = model.predict_chunk({k: torch.stack([v, v], dim=1) for k, v in obs.items()})
    assert np.array_equal(first, chunk[:, 0]) and np.array_equal(second, chunk[:, 1])
