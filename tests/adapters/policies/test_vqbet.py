"""VQ-BeT at tiny size: its settings' checks, its two training phases, its parameter groups
and its schedule (LeRobot's parity is checked in test_vqbet_lerobot_interop.py)."""

from __future__ import annotations

import math

import attrs
import pytest
import torch

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.training.optim import lr_lambda
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import lerobot_config_data
from rlctl.domain.policies.vqbet import VQBeTConfig

TINY = {
    "pretrained_backbone_weights": None,
    "crop_shape": None,
    "spatial_softmax_num_keypoints": 4,
    "vqvae_n_embed": 6,
    "vqvae_embedding_dim": 8,
    "vqvae_enc_hidden_dim": 8,
    "gpt_block_size": 24,
    "gpt_input_dim": 8,
    "gpt_output_dim": 8,
    "gpt_n_layer": 1,
    "gpt_n_head": 2,
    "gpt_hidden_dim": 8,
    "n_obs_steps": 2,
    "n_action_pred_token": 3,
    "action_chunk_size": 2,
    "n_vqvae_training_steps": 2,
}


def config(state=3, action=2, cameras=("observation.images.top",), **fields) -> VQBeTConfig:
    inputs = {"observation.state": typed_feature("STATE", (state,))}
    inputs |= {key: typed_feature("VISUAL", (3, 24, 28)) for key in cameras}
    return VQBeTConfig(
        input_features=inputs,
        output_features={"action": typed_feature("ACTION", (action,))},
        **{**TINY, **fields},
    )


def batch_for(cfg: VQBeTConfig, size: int = 3) -> dict[str, torch.Tensor]:
    steps = cfg.n_obs_steps
    out = {
        "observation.state": torch.randn(size, steps, cfg.robot_state_feature.shape[0]),
        "action": torch.randn(size, len(cfg.action_delta_indices), cfg.action_dim),
    }
    for key, feature in cfg.image_features.items():
        out[key] = torch.rand(size, steps, *feature.shape)
    return out


def test_lerobot_defaults_windows_and_config_file() -> None:
    cfg = VQBeTConfig()
    assert (cfg.n_obs_steps, cfg.n_action_pred_token, cfg.action_chunk_size) == (5, 3, 5)
    assert cfg.crop_shape == (84, 84) and cfg.n_vqvae_training_steps == 20000
    assert cfg.normalization_mapping == {
        "VISUAL": "IDENTITY",
        "STATE": "MIN_MAX",
        "ACTION": "MIN_MAX",
    }
    assert cfg.observation_delta_indices == [-4, -3, -2, -1, 0]
    assert cfg.action_delta_indices == list(range(-4, 7))
    # LeRobot's VQBeTConfig has no n_action_steps: the whole chunk runs; the file omits it.
    assert cfg.n_action_steps == 5
    data = lerobot_config_data(attrs.evolve(cfg, action_chunk_size=4, n_action_steps=4))
    assert "n_action_steps" not in data and data["action_chunk_size"] == 4
    optimizer = cfg.optimizer_preset()
    assert (optimizer.type, optimizer.lr, optimizer.betas) == ("adam", 1e-4, (0.95, 0.999))
    assert cfg.scheduler_preset().num_vqvae_training_steps == 20000


def test_the_schedule_holds_during_the_first_phase_then_warms_up_and_decays() -> None:
    spec = VQBeTConfig(n_vqvae_training_steps=10, scheduler_warmup_steps=4).scheduler_preset()
    rate = lr_lambda(spec, total_steps=30)
    assert [rate(s) for s in (0, 9)] == [1.0, 1.0]
    assert [rate(s) for s in (10, 12)] == [0.0, 0.5]
    assert rate(20) == pytest.approx(0.5 * (1 + math.cos(math.pi * 6 / 26)))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cameras": ()}, "exactly one camera, got 0"),
        ({"cameras": ("observation.images.a", "observation.images.b")}, "exactly one camera"),
        ({"gpt_block_size": 7}, "the GPT reads 8 tokens but gpt_block_size is 7"),
    ],
)
def test_inputs_it_cannot_read_are_one_clear_message(fields, message) -> None:
    with pytest.raises(ConfigError, match=message):
        build_policy(config(**fields))


def test_settings_it_cannot_run_are_refused() -> None:
    with pytest.raises(ConfigError, match="crop_shape \\[30, 30\\] does not fit"):
        config(crop_shape=(30, 30))
    with pytest.raises(ConfigError, match="n_action_steps"):
        config(n_action_steps=1)
    with pytest.raises(ConfigError, match="vision_backbone"):
        config(vision_backbone="vit")


def test_environment_state_is_refused_not_misread() -> None:
    cfg = config()
    inputs = {**cfg.input_features, "observation.environment_state": typed_feature("ENV", (4,))}
    with pytest.raises(ConfigError, match=r"not observation\.environment_state"):
        build_policy(attrs.evolve(cfg, input_features=inputs))


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # The ResNet at these sizes is faster on one thread than on two shared ones.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    ("state", "action", "chunk"), [(3, 2, 2), pytest.param(7, 5, 4, marks=pytest.mark.slow)]
)
def test_the_quantiser_trains_first_then_the_gpt_alone(state, action, chunk) -> None:
    torch.manual_seed(0)
    cfg = config(state=state, action=action, action_chunk_size=chunk, n_action_steps=chunk)
    model = build_policy(cfg).train()
    vqvae = model.vqbet.action_head.vqvae_model
    batch = batch_for(cfg)
    codebook = vqvae.vq_layer.layers[0]._codebook.embed.clone()
    for _ in range(2):
        loss, parts = model(batch)
        assert "recon_l1_error" in parts
        loss.backward()
    # The codebooks follow the encoder by EMA during the first phase, then freeze.
    assert not torch.equal(codebook, vqvae.vq_layer.layers[0]._codebook.embed)
    assert model.discretized and bool(vqvae.vq_layer.freeze_codebook)
    model.zero_grad(set_to_none=True)
    frozen = vqvae.vq_layer.layers[0]._codebook.embed.clone()
    loss, parts = model(batch)
    assert {"offset_loss", "classification_loss"} <= set(parts)
    loss.backward()
    assert all(p.grad is None for p in vqvae.parameters())
    assert model.vqbet.policy.lm_head.weight.grad is not None
    assert torch.equal(frozen, vqvae.vq_layer.layers[0]._codebook.embed)
    chunk_out = model.predict_chunk({k: v for k, v in batch.items() if k != "action"})
    assert chunk_out.shape == (3, chunk, action)


def test_parameter_groups_are_lerobots() -> None:
    cfg = config(sequentially_select=True)
    model = build_policy(cfg)
    groups = model.parameter_groups()
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    assert len({id(p) for g in groups for p in g["params"]}) == len(list(model.parameters()))
    vq_group = groups[1]
    assert vq_group["lr"] == cfg.optimizer_vqvae_lr
    assert vq_group["weight_decay"] == cfg.optimizer_vqvae_weight_decay
    assert groups[2]["weight_decay"] == 0.0
    no_decay = {id(p) for p in groups[2]["params"]}
    assert id(model.vqbet.policy.transformer.wpe.weight) in no_decay
    assert id(model.vqbet.policy.lm_head.weight) not in no_decay


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ({"gpt_n_head": 0}, "gpt_n_head must be at least 1"),
        ({"vqvae_embedding_dim": -1}, "vqvae_embedding_dim must be at least 1"),
        ({"gpt_n_layer": 10**9}, "gpt_n_layer must be between 1 and"),
        ({"dropout": 2.0}, "dropout must be between 0 and 1"),
    ],
)
def test_sizes_and_rates_out_of_range_are_named(fields, complaint) -> None:
    with pytest.raises(ConfigError, match=complaint):
        VQBeTConfig(**fields)
