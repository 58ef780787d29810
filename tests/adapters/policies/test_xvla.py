"""X-VLA in rlctl at tiny sizes: LeRobot's config fields, its processors in LeRobot's order,
checkpoints that store the tied token embedding once, the env processors X-VLA brings for
LIBERO (and only there), and images normalised once when both the env's and the policy's
processors would."""

from __future__ import annotations

import copy
import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

pytest.importorskip("transformers", reason="X-VLA needs transformers")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.vla.action_spaces import action_space
from rlctl.adapters.policies.vla.xvla import (
    Linears,
    is_vendored_florence,
    remap_vendored_florence,
)
from rlctl.adapters.policies.vla.xvla_processors import (
    ImageNetNormalize,
    Rotation6DToAxisAngle,
    imagenet_normalize,
    xvla_libero_processors,
)
from rlctl.adapters.sim.envs.libero import LiberoEnv
from rlctl.adapters.sim.simulation import GymSimulation, policy_env_processors
from rlctl.adapters.training.optim import build_optimizer
from rlctl.domain.config import structure, unstructure
from rlctl.domain.errors import ConfigError, FeatureMismatch, InvalidInput
from rlctl.domain.features import typed_feature
from rlctl.domain.frames import Transition
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.act import ACTConfig
from rlctl.domain.policies.xvla import XVLAConfig
from rlctl.domain.processors import ProcessorPipeline

TINY = runpy.run_path(str(Path(__file__).with_name("tiny_xvla.py")))
SHARED = "model.vlm.language_model.shared.weight"
ENCODER = "model.vlm.language_model.encoder.embed_tokens.weight"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder: Path = TINY["write_tiny_bart_tokenizer"](tmp_path_factory.mktemp("bart") / "tok")
    return folder


def tiny_config(tokenizer: Path, **overrides: Any) -> XVLAConfig:
    fields: dict[str, Any] = {
        "input_features": {
            "observation.state": typed_feature("STATE", (8,)),
            "observation.images.image": typed_feature("VISUAL", (3, 32, 32)),
            "observation.images.image2": typed_feature("VISUAL", (3, 32, 32)),
        },
        "output_features": {"action": typed_feature("ACTION", (7,))},
        "florence_config": TINY["tiny_florence"](),
        "tokenizer_name": str(tokenizer),
        "tokenizer_max_length": 8,
        "hidden_size": 32,
        "depth": 1,
        "num_heads": 4,
        "num_domains": 3,
        "len_soft_prompts": 4,
        "chunk_size": 4,
        "n_action_steps": 4,
        "max_len_seq": 96,
        "num_denoising_steps": 2,
        "device": "cpu",
        **overrides,
    }
    return XVLAConfig(**fields)


def observation(rows: int = 2) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {
        "observation.state": rng.normal(size=(rows, 8)).astype(np.float32),
        "observation.images.image": rng.uniform(size=(rows, 3, 32, 32)).astype(np.float32),
        "observation.images.image2": rng.uniform(size=(rows, 3, 32, 32)).astype(np.float32),
        "task": ["close the drawer"] * rows,
    }


def test_the_config_has_lerobots_fields_and_defaults_and_round_trips() -> None:
    config = XVLAConfig()
    data = unstructure(config)
    expected = {
        "chunk_size": 32, "n_action_steps": 32, "dtype": "float32", "florence_config": {},
        "tokenizer_name": "facebook/bart-large", "tokenizer_max_length": 64,
        "tokenizer_padding_side": "right", "pad_language_to": "max_length", "hidden_size": 1024,
        "depth": 24, "num_heads": 16, "mlp_ratio": 4.0, "num_domains": 30,
        "len_soft_prompts": 32, "dim_time": 32, "max_len_seq": 512, "use_hetero_proj": False,
        "action_mode": "ee6d", "num_denoising_steps": 10, "use_proprio": True,
        "max_state_dim": 32, "max_action_dim": 20, "domain_feature_key": None,
        "resize_imgs_with_padding": None, "num_image_views": None, "empty_cameras": 0,
        "freeze_vision_encoder": False, "freeze_language_encoder": False,
        "train_policy_transformer": True, "train_soft_prompts": True, "optimizer_lr": 1e-4,
        "optimizer_betas": [0.9, 0.99], "optimizer_eps": 1e-8, "optimizer_weight_decay": 0.0,
        "optimizer_grad_clip_norm": 10.0, "optimizer_soft_prompt_lr_scale": 1.0,
        "optimizer_soft_prompt_warmup_lr_scale": None, "scheduler_warmup_steps": 1000,
        "scheduler_decay_steps": 30000, "scheduler_decay_lr": 2.5e-6,
        "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "IDENTITY", "ACTION": "IDENTITY"},
    }  # fmt: skip
    for key, value in expected.items():
        assert json.loads(json.dumps(data[key])) == value, key
    again = structure(json.loads(json.dumps({**data, "type": "xvla"})), PolicyConfig)
    assert again == config
    assert config.optimizer_preset().betas == (0.9, 0.99)
    assert config.scheduler_preset().peak_lr == 1e-4


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"chunk_size": 0}, "chunk_size"),
        ({"n_action_steps": 40}, "n_action_steps"),
        ({"dtype": "float16"}, "dtype"),
        ({"action_mode": "polar"}, "unknown action space"),
        ({"num_image_views": 0}, "num_image_views"),
        ({"pad_language_to": "all"}, "pad_language_to"),
        ({"num_heads": 0}, "num_heads must be at least 1"),
        ({"num_heads": -4}, "num_heads must be at least 1"),
        ({"hidden_size": -8}, "hidden_size must be at least 1"),
        ({"depth": 10**9}, "depth must be between 1 and"),
        ({"chunk_size": 10**9, "n_action_steps": 1}, "max_len_seq"),
    ],
)
def test_bad_settings_are_named(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        XVLAConfig(**fields)


@pytest.mark.slow
def test_processors_are_lerobots_in_its_order(tokenizer: Path, tmp_path: Path) -> None:
    policy = create_policy(tiny_config(tokenizer))
    policy.save(tmp_path / "model")
    pre = json.loads((tmp_path / "model" / "policy_preprocessor.json").read_text())
    post = json.loads((tmp_path / "model" / "policy_postprocessor.json").read_text())
    assert [s["registry_name"] for s in pre["steps"]] == [
        "rename_observations_processor",
        "to_batch_processor",
        "tokenizer_processor",
        "xvla_image_to_float",
        "xvla_imagenet_normalize",
        "xvla_add_domain_id",
        "device_processor",
        "normalizer_processor",
    ]
    assert [s["registry_name"] for s in post["steps"]] == [
        "unnormalizer_processor",
        "device_processor",
    ]
    steps = {s["registry_name"]: s["config"] for s in pre["steps"]}
    assert steps["xvla_image_to_float"] == {"image_keys": None, "validate_range": True}
    assert steps["xvla_add_domain_id"] == {"domain_id": 0}


@pytest.mark.slow
def test_saves_the_tied_embedding_once_and_reloads_the_same_chunks(
    tokenizer: Path, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    policy = create_policy(tiny_config(tokenizer, empty_cameras=1))
    folder = policy.save(tmp_path / "model")
    state = load_file(folder / "model.safetensors")
    assert ENCODER in state and SHARED not in state  # as LeRobot's files hold it
    noise = torch.randn(2, 4, 20)
    expected = policy.predict_chunk(observation(), noise=noise).actions
    assert expected.shape == (2, 4, 20)  # ee6d: the model's 20 values, grippers through a sigmoid
    loaded = load_policy_folder(folder)
    torch.testing.assert_close(loaded.predict_chunk(observation(), noise=noise).actions, expected)
    language = loaded.model.model.vlm.language_model
    assert language.encoder.embed_tokens.weight is language.shared.weight

    # A file holding the other name of the tied embedding loads too.
    state[SHARED] = state.pop(ENCODER)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    again = load_policy_folder(folder)
    torch.testing.assert_close(again.predict_chunk(observation(), noise=noise).actions, expected)


def test_the_speed_paths_give_the_reference_chunks(
    tokenizer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packed weights over the denoising steps and a last block over the action tokens only:
    the chunks of the reference's arithmetic (`speed_paths = False`), up to float rounding."""
    torch.manual_seed(0)
    policy = create_policy(tiny_config(tokenizer, depth=3))
    model = policy.model.model
    noise = torch.randn(2, 4, 20)
    built: list[Linears] = []
    original = Linears.__init__

    def recorded(self: Linears, *args: Any) -> None:
        original(self, *args)
        built.append(self)

    monkeypatch.setattr(Linears, "__init__", recorded)
    fast = policy.predict_chunk(observation(), noise=noise).actions
    [linears] = built
    # 2 rows of [4 actions, the VLM's and the second camera's tokens, 4 soft prompts].
    assert linears.tokens % 2 == 0 and linears.tokens > 2 * 8
    if Linears.available(model.transformer.blocks):  # a CPU build of torch with MKL
        assert len(linears.packed) == 3 * 4  # qkv, proj, fc1, fc2 of each block
    model.speed_paths = False
    plain = policy.predict_chunk(observation(), noise=noise).actions
    assert len(built) == 1  # the reference path packs nothing
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-5)
    assert not torch.equal(fast, torch.zeros_like(fast))


def test_a_loaded_model_packs_its_weights_ahead_and_keeps_them_while_they_hold(
    tokenizer: Path, tmp_path: Path
) -> None:
    """Loading packs the blocks' weights for a one-row chunk in the background; one-row chunks
    use that packing and keep it; another row count, or a weight changed in place (a training
    step), packs again; the chunks stay the reference path's; a copy of the model starts with
    no packing."""
    torch.manual_seed(0)
    folder = create_policy(tiny_config(tokenizer, depth=2)).save(tmp_path / "model")
    loaded = load_policy_folder(folder)
    model = loaded.model.model
    if not Linears.available(model.transformer.blocks) or torch.cuda.is_available():
        assert model.packed.thread is None  # nothing to pack ahead here
        return
    assert model.packed.thread is not None
    model.packed.thread.join()
    warm = model.packed.linears
    assert warm is not None and warm.tokens == model.one_row_tokens()
    noise = torch.randn(1, 4, 20)
    first = loaded.predict_chunk(observation(1), noise=noise).actions
    assert model.packed.linears is warm  # the load's packing fits the chunk
    loaded.predict_chunk(observation(1), noise=noise)
    assert model.packed.linears is warm  # and is kept
    loaded.predict_chunk(observation(2), noise=torch.randn(2, 4, 20))
    two_rows = model.packed.linears
    assert two_rows is not None and two_rows.tokens == 2 * warm.tokens
    with torch.no_grad():
        model.transformer.blocks[0].mlp.fc1.weight.mul_(1.5)
    changed = loaded.predict_chunk(observation(1), noise=noise).actions
    assert model.packed.linears is not two_rows and model.packed.linears is not warm
    assert not torch.equal(changed, first)
    assert copy.deepcopy(model).packed.linears is None
    model.speed_paths = False
    reference = loaded.predict_chunk(observation(1), noise=noise).actions
    torch.testing.assert_close(changed, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_process_that_loads_and_exits_at_once_exits_cleanly(
    tokenizer: Path, tmp_path: Path
) -> None:
    """The background packing may still run when a script that only loaded the policy ends:
    the process exits with 0, not the abort of a daemon thread inside torch at shutdown."""
    torch.manual_seed(0)
    folder = create_policy(tiny_config(tokenizer, depth=2)).save(tmp_path / "model")
    script = (
        "import sys\n"
        "from rlctl.adapters.policies.loaded_policy import load_policy_folder\n"
        "load_policy_folder(sys.argv[1])\n"
    )
    for _ in range(3):  # the abort came at most exits, not every one
        done = subprocess.run(
            [sys.executable, "-c", script, str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "terminate called" not in done.stderr


def test_packed_linears_match_nn_linear_and_leave_other_shapes_to_it() -> None:
    torch.manual_seed(0)
    blocks = nn.ModuleList([nn.Sequential(nn.Linear(16, 24), nn.Linear(24, 16))])
    linears = Linears(blocks, tokens=10)
    first = blocks[0][0]
    x = torch.randn(2, 5, 16)  # 10 rows: the packed product where MKL is
    torch.testing.assert_close(linears(first, x), first(x))
    other = torch.randn(3, 16)  # another row count: nn.Linear itself
    torch.testing.assert_close(linears(first, other), first(other))
    assert bool(linears.packed) == Linears.available(blocks)
    assert not Linears(blocks.to(torch.float64), tokens=10).packed  # float32 only


@pytest.mark.slow
def test_trains_every_part_with_lerobots_learning_rates(tokenizer: Path) -> None:
    policy = create_policy(tiny_config(tokenizer, action_mode="auto", max_action_dim=10))
    model = policy.model
    batch = policy._preprocess(
        {k: torch.as_tensor(v) if k != "task" else v for k, v in observation().items()}
        | {"action": torch.rand(2, 4, 7)}
    )
    loss, logs = model(batch)
    loss.backward()
    assert set(logs) == {"joints_loss", "loss"} and np.isfinite(logs["loss"])
    grads = [
        n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0
    ]
    assert any(n.startswith("model.vlm.vision_tower") for n in grads)
    assert any("soft_prompt_hub" in n for n in grads)
    # LeRobot's xvla-adamw: named groups, the VLM at a tenth of the lr and weight decay.
    spec = attrs.evolve(
        model.config.optimizer_preset(), weight_decay=0.01, soft_prompt_warmup_lr_scale=0.01
    )
    assert spec.type == "xvla-adamw"
    groups = build_optimizer(spec, model.parameter_groups()).param_groups
    vlm, prompts, rest = groups
    assert [g["name"] for g in groups] == ["vlm", "soft_prompts", "other"]
    assert vlm["lr"] == pytest.approx(1e-5) and vlm["weight_decay"] == pytest.approx(0.001)
    assert prompts["lr"] == pytest.approx(1e-6) and len(prompts["params"]) == 1
    assert rest["lr"] == pytest.approx(1e-4) and rest["weight_decay"] == pytest.approx(0.01)
    assert policy.predict_chunk(observation()).actions.shape == (2, 4, 7)


def test_libero_gets_xvlas_env_processors_and_other_envs_or_policies_their_own() -> None:
    found = policy_env_processors(XVLAConfig(), "libero")
    assert found is not None
    pre, post = found
    assert [s.name for s in pre] == [
        "xvla_libero_processor",
        "xvla_imagenet_normalize",
        "xvla_add_domain_id",
    ]
    assert [s.name for s in post] == ["xvla_rotation_6d_to_axis_angle"]
    assert policy_env_processors(XVLAConfig(), "metaworld") is None
    assert policy_env_processors(ACTConfig(), "libero") is None
    # Through the simulation the eval use case asks.
    simulation = GymSimulation(LiberoEnv())
    assert [s.name for s in simulation.processors(XVLAConfig())[0]] == [s.name for s in pre]
    assert [s.name for s in simulation.processors(ACTConfig())[0]] == ["libero_processor"]
    assert [s.name for s in simulation.processors()[0]] == ["libero_processor"]
    features = LiberoEnv().env_features()
    from rlctl.domain.env_observation import env_policy_features

    seen = pre.transform_features(env_policy_features(features, LiberoEnv().features_map))
    assert seen["observation.state"].shape == (20,)


@pytest.mark.slow
def test_images_normalised_by_the_env_are_not_normalised_again(tokenizer: Path) -> None:
    """LIBERO's X-VLA env processors normalise the images, and so does the policy's own
    pre-processor (LeRobot 0.6.1 then refuses the image): rlctl normalises once."""
    policy = create_policy(tiny_config(tokenizer))
    pre, _ = xvla_libero_processors()
    raw = observation()
    env_batch = pre.process_batch(raw)
    # The mark travels as a plain array with the batch's rows (to a served policy too).
    mark = env_batch["xvla_imagenet_normalized.observation.images.image"]
    assert mark.dtype == np.bool_ and mark.shape == (2,) and mark.all()
    ours = policy._preprocess(
        {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in env_batch.items()}
    )
    expected = imagenet_normalize(torch.as_tensor(raw["observation.images.image2"]))
    torch.testing.assert_close(ours["observation.images.image2"], expected)
    flipped = torch.as_tensor(raw["observation.images.image"]).flip(2, 3)
    torch.testing.assert_close(ours["observation.images.image"], imagenet_normalize(flipped))
    assert policy.predict_chunk(env_batch).actions.shape == (2, 4, 20)


def test_an_image_out_of_range_is_named() -> None:
    step = ImageNetNormalize()
    image = np.full((1, 3, 4, 4), 3.0, np.float32)
    with pytest.raises(InvalidInput, match=r"observation\.images\.top"):
        step(Transition(observation={"observation.images.top": image}))


def test_rotation_6d_becomes_axis_angle_and_the_gripper_plus_or_minus_one() -> None:
    actions = np.zeros((2, 20), np.float32)
    actions[:, :3] = [[1, 2, 3], [4, 5, 6]]
    actions[0, 3:9] = [1, 0, 0, 0, 1, 0]  # no rotation
    actions[1, 3:9] = [0, 1, 0, -1, 0, 0]  # a quarter turn about z
    actions[:, 9] = [0.9, 0.1]
    out = ProcessorPipeline([Rotation6DToAxisAngle()]).process_batch({"action": actions})["action"]
    assert out.shape == (2, 7)
    np.testing.assert_allclose(out[0], [1, 2, 3, 0, 0, 0, 1], atol=1e-5)
    np.testing.assert_allclose(out[1], [4, 5, 6, 0, 0, np.pi / 2, -1], atol=1e-4)
    with pytest.raises(InvalidInput, match="6D rotation"):
        Rotation6DToAxisAngle()(Transition(action=np.zeros((2, 7), np.float32)))


def test_action_spaces() -> None:
    auto = action_space("auto", real_dim=7, max_dim=10)
    padded = auto.pad(torch.ones(2, 3, 7))
    assert padded.shape == (2, 3, 10) and padded[..., 7:].abs().sum() == 0
    assert auto.postprocess(padded).shape == (2, 3, 7)
    with pytest.raises(ConfigError, match="max_action_dim"):
        action_space("auto", real_dim=12, max_dim=10)
    with pytest.raises(ConfigError, match="franka_joint7"):
        action_space("franka_joint7", real_dim=7, max_dim=20).pad(torch.ones(1, 1, 9))
    ee6d = action_space("ee6d", real_dim=7, max_dim=20)
    out = ee6d.postprocess(torch.zeros(1, 1, 20))
    assert out[0, 0, 9] == 0.5 and out[0, 0, 19] == 0.5 and out[0, 0, 0] == 0


def test_checkpoints_of_the_remote_code_florence_layout_are_renamed() -> None:
    tensor = torch.zeros(3, 2)
    state = {
        "model.vlm.image_projection": tensor,
        "model.vlm.vision_tower.convs.0.proj.weight": tensor,
        "model.vlm.vision_tower.blocks.1.0.spatial_block.window_attn.fn.qkv.weight": tensor,
        "model.vlm.vision_tower.blocks.1.0.channel_block.ffn.fn.net.fc1.bias": tensor,
        "model.vlm.language_model.model.encoder.layers.0.fc1.weight": tensor,
        "model.vlm.language_model.final_logits_bias": tensor,
        "model.transformer.pos_emb": tensor,
    }
    assert is_vendored_florence(state)
    out = remap_vendored_florence(state)
    assert out["model.vlm.multi_modal_projector.image_projection.weight"].shape == (2, 3)
    assert set(out) == {
        "model.vlm.multi_modal_projector.image_projection.weight",
        "model.vlm.vision_tower.convs.0.conv.weight",
        "model.vlm.vision_tower.blocks.1.0.spatial_block.window_attn.qkv.weight",
        "model.vlm.vision_tower.blocks.1.0.channel_block.ffn.fc1.bias",
        "model.vlm.language_model.encoder.layers.0.fc1.weight",
        "model.transformer.pos_emb",
    }


@pytest.mark.slow
def test_wrong_inputs_get_one_clear_message(tokenizer: Path) -> None:
    policy = create_policy(tiny_config(tokenizer))
    missing_state = {k: v for k, v in observation().items() if k != "observation.state"}
    with pytest.raises(FeatureMismatch, match=r"observation\.state"):
        policy.predict_chunk(missing_state)
    with pytest.raises(ConfigError, match="domain ids"):
        policy.model.domain_ids({"domain_id": torch.tensor([5, 1])}, 2)
    with pytest.raises(ConfigError, match="3 domain ids for a batch of 2"):
        policy.model.domain_ids({"domain_id": torch.tensor([0, 1, 1])}, 2)
    uneven = observation() | {"observation.images.image2": np.zeros((2, 3, 24, 32), np.float32)}
    with pytest.raises(ConfigError, match="cameras differ in size"):
        policy.predict_chunk(uneven)
    no_cameras = {k: v for k, v in observation().items() if "images" not in k}
    with pytest.raises(ConfigError, match="cameras"):
        policy.predict_chunk(no_cameras)
    with pytest.raises(ConfigError, match="relative"):
        create_policy(tiny_config(tokenizer, use_relative_actions=True))
    with pytest.raises(ConfigError, match="Florence-2 config has no vision_config"):
        create_policy(tiny_config(tokenizer, florence_config={}))
