"""GR00T N1.7 at tiny sizes (tiny_groot.py): the config as LeRobot's, the processors, the model's
chunks, its speed paths against the reference path, its real-time chunking, its checkpoints and
a training step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy, load_policy_folder
from rlctl.adapters.policies.vla.groot_processors import (
    GrootActionUnpack,
    GrootPackInputs,
    PackConfig,
    UnpackConfig,
    prompt_texts,
)
from rlctl.adapters.policies.vla.rtc import PrefixGuidance, overlap_blend
from rlctl.domain.config import structure, unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.frames import Transition
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.config import lerobot_config_data
from rlctl.domain.policies.groot import GrootConfig
from rlctl.domain.policies.rtc import RTCConfig

# LeRobot 0.6.1's GrootConfig keys, as its config.json holds them (type included).
LEROBOT_KEYS = {
    "type", "n_obs_steps", "input_features", "output_features", "device", "use_amp", "use_peft",
    "push_to_hub", "repo_id", "private", "tags", "license", "pretrained_path",
    "pretrained_revision", "chunk_size", "n_action_steps", "max_state_dim", "max_action_dim",
    "normalization_mapping", "base_model_path", "action_decode_transform", "embodiment_tag",
    "tune_llm", "tune_visual", "tune_projector", "tune_diffusion_model", "tune_vlln",
    "tune_top_llm_layers", "num_inference_timesteps", "rtc_ramp_rate", "use_flash_attention",
    "optimizer_lr", "optimizer_betas", "optimizer_eps", "optimizer_weight_decay", "warmup_ratio",
    "use_bf16", "model_params_fp32", "image_size", "tokenizer_assets_repo", "lora_rank",
    "lora_alpha", "lora_dropout", "lora_full_model", "video_backend", "balance_dataset_weights",
    "balance_trajectory_weights", "dataset_paths", "output_dir", "save_steps", "max_steps",
    "batch_size", "dataloader_num_workers", "report_to", "resume",
}  # fmt: skip
HORIZON, STATE, ACTION = 8, 5, 3


def tiny_config(tiny: Path, **overrides: Any) -> GrootConfig:
    cameras = overrides.pop(
        "cameras", {"observation.images.top": (3, 40, 56), "observation.images.wrist": (3, 24, 32)}
    )
    settings: dict[str, Any] = {
        "base_model_path": str(tiny / "base"),
        "chunk_size": HORIZON,
        "n_action_steps": HORIZON,
        "max_state_dim": 16,
        "max_action_dim": 16,
        "use_bf16": False,
        "device": "cpu",
        **overrides,
    }
    return GrootConfig(
        input_features={
            "observation.state": typed_feature("STATE", (STATE,)),
            **{key: typed_feature("VISUAL", shape) for key, shape in cameras.items()},
        },
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        **settings,
    )


def stats() -> dict[str, dict[str, np.ndarray]]:
    return {
        "observation.state": {"min": -np.ones(STATE) * 2, "max": np.ones(STATE) * 3},
        "action": {"min": np.array([-1.0, 0.0, -2.0]), "max": np.array([1.0, 4.0, 2.0])},
    }


def observation(rows: int = 2, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "observation.state": rng.normal(size=(rows, STATE)).astype(np.float32),
        "observation.images.top": rng.uniform(size=(rows, 3, 40, 56)).astype(np.float32),
        "observation.images.wrist": rng.uniform(size=(rows, 3, 24, 32)).astype(np.float32),
        "task": ["Close the drawer!", ""][:rows],
    }


@pytest.fixture(scope="module")
def policy(tiny_groot_dir: Path) -> LoadedPolicy:
    torch.manual_seed(0)
    loaded = create_policy(tiny_config(tiny_groot_dir), stats())
    with torch.no_grad():
        for param in loaded.model.parameters():
            param.copy_(torch.randn_like(param) * 0.05)
    return loaded


# -- the config --------------------------------------------------------------------------------


def test_config_has_lerobots_fields_defaults_and_remaps(caplog: pytest.LogCaptureFixture) -> None:
    config = GrootConfig()
    assert set(lerobot_config_data(config)) | {"type"} == LEROBOT_KEYS
    assert config.base_model_path == "nvidia/GR00T-N1.7-3B"
    assert (config.chunk_size, config.max_state_dim, config.image_size) == (40, 132, (256, 256))
    assert config.action_decode_transform is None and config.relative_exclude_joints == ()
    assert GrootConfig(embodiment_tag="libero_sim").action_decode_transform == "libero"
    explicit = GrootConfig(embodiment_tag="libero_sim", action_decode_transform="none")
    assert explicit.action_decode_transform is None
    legacy = GrootConfig(chunk_size=50, n_action_steps=50, max_state_dim=64, image_size=(224, 224))
    assert (legacy.chunk_size, legacy.n_action_steps, legacy.max_state_dim) == (40, 40, 132)
    assert legacy.image_size == (256, 256) and "legacy GR00T N1.5-era" in caplog.text
    assert config.action_delta_indices == list(range(40)) and config.drop_n_last_frames == 39
    assert GrootConfig(chunk_size=60, n_action_steps=8).action_delta_indices == list(range(40))
    optimizer, scheduler = config.optimizer_preset(), config.scheduler_preset()
    assert (optimizer.type, optimizer.lr, optimizer.grad_clip_norm) == ("adamw", 1e-4, 1.0)
    assert (scheduler.name, scheduler.num_warmup_steps) == ("cosine", 500)
    data = {**unstructure(config), "type": "groot"}
    assert structure(json.loads(json.dumps(data)), PolicyConfig) == config


@pytest.mark.parametrize(
    ("settings", "where"),
    [
        ({"base_model_path": "nvidia/GR00T-N1.5-3B"}, "policy.base_model_path"),
        ({"tokenizer_assets_repo": "nvidia/eagle"}, "policy.tokenizer_assets_repo"),
        ({"action_decode_transform": "flip"}, "policy.action_decode_transform"),
        ({"n_action_steps": 41}, "policy.n_action_steps"),
        ({"num_inference_timesteps": 0}, "policy.num_inference_timesteps"),
        ({"lora_rank": 8}, "policy.lora_rank"),
        (
            {
                "max_state_dim": 4,
                "input_features": {"observation.state": typed_feature("STATE", (6,))},
            },
            "policy.max_state_dim",
        ),
    ],
)
def test_config_refuses_what_lerobot_refuses(settings: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as error:
        GrootConfig(**settings)
    assert error.value.where == where


@pytest.mark.slow
def test_the_model_refuses_sizes_its_base_model_cannot_take(tiny_groot_dir: Path) -> None:
    with pytest.raises(ConfigError, match="differs from the base model"):
        create_policy(tiny_config(tiny_groot_dir, max_state_dim=32), stats())
    with pytest.raises(ConfigError, match="at least one camera"):
        create_policy(tiny_config(tiny_groot_dir, cameras={}), stats())
    with pytest.raises(ConfigError, match=r"GR00T base model 'nobody/none'"):
        create_policy(tiny_config(tiny_groot_dir, base_model_path="nobody/none"), stats())


# -- the processors ----------------------------------------------------------------------------


def test_pack_normalises_pads_and_masks_as_lerobot() -> None:
    pack = GrootPackInputs(
        PackConfig(action_horizon=4, valid_action_horizon=4, max_state_dim=8, max_action_dim=6),
        stats(),
    )
    state = torch.tensor([[-2.0, 3.0, 0.5, 10.0, -9.0]])
    action = torch.tensor([[[0.0, 2.0, 1.0], [1.0, 4.0, 9.0], [-1.0, 0.0, -2.0]]])
    out = pack(
        Transition(
            observation={"observation.state": state},
            action=action,
            complementary_data={
                "task": ["Pick-up the cube."],
                "action_is_pad": torch.tensor([[0, 0, 1]]),
            },
        )
    )
    packed = out.observation["state"]
    assert packed.shape == (1, 1, 8)
    assert torch.allclose(packed[0, 0, :5], torch.tensor([-1.0, 1.0, 0.0, 1.0, -1.0]))
    assert torch.equal(packed[0, 0, 5:], torch.zeros(3))
    assert out.action.shape == (1, 4, 6)
    assert torch.allclose(out.action[0, 0, :3], torch.tensor([0.0, 0.0, 0.5]))
    assert torch.equal(out.action[0, 2:], torch.zeros(2, 6))  # padded and past the chunk
    mask = out.complementary_data["action_mask"]
    assert mask[0, :, :3].tolist() == [[1] * 3, [1] * 3, [0] * 3, [0] * 3]
    assert torch.equal(mask[0, :, 3:], torch.zeros(4, 3))
    assert out.complementary_data["language"] == ["pickup the cube"]
    assert out.complementary_data["embodiment_id"].tolist() == [10]
    restored = GrootPackInputs(pack.config)
    restored.load_state_dict(pack.state_dict())
    assert restored.state_dict().keys() == pack.state_dict().keys()


def test_prompt_texts_follow_lerobots_rules() -> None:
    assert prompt_texts(None, 2, formalize=True) == ["perform the task"] * 2
    assert prompt_texts([""], 2, formalize=True) == ["perform the task"] * 2
    assert prompt_texts(["Open: the DOOR_1."], 1, formalize=True) == ["open the door_1"]
    with pytest.raises(Exception, match="task texts"):
        prompt_texts(["a", "b", "c"], 2, formalize=True)


def test_unpack_unnormalises_clips_and_maps_libero_grippers() -> None:
    unpack = GrootActionUnpack(UnpackConfig(env_action_dim=3, clip_normalized_action=True), stats())
    action = torch.tensor([[[0.0, 2.0, -1.0, 0.7]]])
    out = unpack(Transition(action=action)).action
    assert torch.allclose(out, torch.tensor([[[0.0, 4.0, -2.0]]]))
    libero = GrootActionUnpack(UnpackConfig(env_action_dim=7, libero_gripper_action=True))
    grip = libero(Transition(action=torch.tensor([[0.0] * 6 + [0.8]]))).action
    assert grip[0, -1].item() == -1.0


# -- the model ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_predicts_chunks_for_cameras_of_any_size_and_a_missing_state(policy: LoadedPolicy) -> None:
    chunk = policy.predict_chunk(observation()).actions
    assert chunk.shape == (2, HORIZON, ACTION) and torch.isfinite(chunk).all()
    without_state = {k: v for k, v in observation(1).items() if k != "observation.state"}
    assert policy.predict_chunk(without_state).actions.shape == (1, HORIZON, ACTION)
    one_camera = {k: v for k, v in observation(1).items() if k != "observation.images.wrist"}
    assert policy.predict_chunk(one_camera).actions.shape == (1, HORIZON, ACTION)


@pytest.mark.slow
def test_speed_paths_give_the_reference_chunks(policy: LoadedPolicy) -> None:
    noise = np.random.default_rng(1).normal(size=(2, HORIZON, 16)).astype(np.float32)
    head = policy.model.model
    backbone = policy.model._groot_model.backbone
    calls = {"k": 0}
    hook = head.model.transformer_blocks[0].attn1.to_k.register_forward_hook(
        lambda *_: calls.__setitem__("k", calls["k"] + 1)
    )
    try:
        fast = policy.predict_chunk(observation(), noise=noise).actions
        fast_calls = calls["k"]
        head.speed_paths = backbone.speed_paths = False
        plain = policy.predict_chunk(observation(), noise=noise).actions
    finally:
        head.speed_paths = backbone.speed_paths = True
        hook.remove()
    steps = head.euler_steps
    assert (fast_calls, calls["k"] - fast_calls) == (1, steps)  # keys once, not per step
    assert float((fast - plain).abs().max()) <= 1e-5


@pytest.mark.slow
def test_real_time_chunking_keeps_the_committed_steps(policy: LoadedPolicy) -> None:
    batch = policy._preprocess(observation(1))
    noise = torch.randn(1, HORIZON, 16)
    leftover = torch.rand(1, 5, ACTION) * 0.5
    guidance = PrefixGuidance(leftover, 2, RTCConfig(enabled=True, execution_horizon=4))
    start, strength = overlap_blend(noise, guidance, 6.0)  # type: ignore[misc]
    assert torch.equal(start[0, :4, :ACTION], leftover[0, 1:5])
    assert strength[0, :, 0].tolist()[:2] == [0.0, 0.0] and strength[0, 4:, 0].eq(1).all()
    assert 0 < strength[0, 2, 0] < strength[0, 3, 0] < 1
    chunk = policy.model.predict_guided_chunk(batch, guidance, noise=noise)
    assert torch.allclose(chunk[0, :2], leftover[0, 1:3])  # frozen: the leftover as it was
    free = policy.model.predict_chunk(batch, noise=noise)
    assert not torch.allclose(chunk[0, 2:4], free[0, 2:4])
    padded = PrefixGuidance(torch.cat([leftover, torch.zeros(1, 3, ACTION)], 1), 2, guidance.config)
    again = policy.model.predict_guided_chunk(batch, padded, noise=noise)
    assert torch.allclose(again, chunk)  # trailing zero rows are the RTC engine's padding


@pytest.mark.slow
def test_checkpoint_round_trip_keeps_lerobots_keys(policy: LoadedPolicy, tmp_path: Path) -> None:
    from safetensors import safe_open

    folder = policy.save(tmp_path / "groot")
    config = json.loads((folder / "config.json").read_text())
    assert set(config) == LEROBOT_KEYS and config["type"] == "groot"
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        keys = set(weights.keys())
    assert "_groot_model.backbone.model.lm_head.weight" in keys
    assert not any("embed_tokens" in key for key in keys)
    assert any(
        key.startswith("_groot_model.action_head.model.transformer_blocks.0.attn1.to_k")
        for key in keys
    )
    steps = [
        s["registry_name"]
        for s in json.loads((folder / "policy_preprocessor.json").read_text())["steps"]
    ]
    assert steps == [
        "rename_observations_processor",
        "to_batch_processor",
        "groot_n1_7_pack_inputs_v1",
        "groot_n1_7_vlm_encode_v1",
        "device_processor",
    ]
    noise = np.random.default_rng(2).normal(size=(2, HORIZON, 16)).astype(np.float32)
    loaded = load_policy_folder(folder)
    before = policy.predict_chunk(observation(), noise=noise).actions
    after = loaded.predict_chunk(observation(), noise=noise).actions
    assert float((before - after).abs().max()) <= 1e-6


@pytest.mark.slow
def test_a_training_step_moves_the_head_not_the_frozen_backbone(tiny_groot_dir: Path) -> None:
    torch.manual_seed(0)
    loaded = create_policy(tiny_config(tiny_groot_dir, use_bf16=True), stats())
    model = loaded.model.train()
    rng = np.random.default_rng(0)
    batch = loaded._preprocess(
        {
            **observation(),
            "action": torch.from_numpy(rng.normal(size=(2, HORIZON, ACTION)).astype(np.float32)),
        }
    )
    groups = model.parameter_groups()
    assert groups[1]["weight_decay"] == 0.0 and groups[0]["params"] and groups[1]["params"]
    optimizer = torch.optim.AdamW(groups, lr=1e-3)
    loss, logged = model(batch)
    loss.backward()
    optimizer.step()
    assert np.isfinite(logged["loss"])
    backbone = model._groot_model.backbone
    assert all(p.grad is None for p in backbone.parameters())
    assert model._groot_model.action_head.model.proj_out_2.weight.grad is not None
