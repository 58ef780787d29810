"""π0 and π0.5 at tiny sizes, built by rlctl: they save and reload bit-exactly (weights loaded
onto a meta-built model), predict deterministically with fixed noise, learn (the loss goes down
on a fixed batch), keep LeRobot's processor order and honour the freezing options; their
configs round-trip LeRobot's config.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="π0 needs the smolvla extra")

from rlctl.adapters.policies.checkpoint import read_config, read_model
from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.vla.backbones.paligemma import PaliGemmaWithExpertModel
from rlctl.adapters.policies.vla.pi0 import PI0Policy
from rlctl.domain.config import structure
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.config import lerobot_config_data
from rlctl.domain.policies.pi0 import GEMMA_VARIANTS, PI0Config, PiConfig, gemma_sizes
from rlctl.domain.policies.pi05 import PI05Config

STATE, ACTION, CHUNK, MAX_ACTION = 5, 3, 4, 6
CAMERA = "observation.images.top"
VLM = (
    "custom:width=32,depth=2,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)
EXPERT = "custom:width=16,depth=2,mlp_dim=32,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320"
KINDS = {"pi0": PI0Config, "pi05": PI05Config}


def tiny_config(kind: str, **overrides: object) -> PiConfig:
    fields: dict[str, object] = {
        "input_features": {
            "observation.state": typed_feature("STATE", (STATE,)),
            CAMERA: typed_feature("VISUAL", (3, 40, 56)),
        },
        "output_features": {"action": typed_feature("ACTION", (ACTION,))},
        "paligemma_variant": VLM,
        "action_expert_variant": EXPERT,
        "chunk_size": CHUNK,
        "n_action_steps": CHUNK,
        "max_state_dim": 8,
        "max_action_dim": MAX_ACTION,
        "num_inference_steps": 3,
        "image_resolution": (28, 28),
        "tokenizer_max_length": 40,
        **overrides,
    }
    return KINDS[kind](**fields)  # type: ignore[arg-type]


def stats() -> dict[str, dict[str, np.ndarray]]:
    return {
        "observation.state": {
            "mean": np.linspace(-1, 1, STATE),
            "std": np.full(STATE, 2.0),
            "q01": np.full(STATE, -2.0),
            "q99": np.full(STATE, 2.0),
        },
        "action": {
            "mean": np.array([0.5, -0.5, 0.0]),
            "std": np.array([1.0, 2.0, 0.5]),
            "q01": np.array([-1.0, -3.0, -1.0]),
            "q99": np.array([2.0, 2.0, 1.0]),
        },
    }


def raw_batch(batch: int = 2, seed: int = 0) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    return {
        "observation.state": rng.normal(size=(batch, STATE)).astype(np.float32),
        CAMERA: rng.uniform(size=(batch, 3, 40, 56)).astype(np.float32),
        "task": ["close the drawer", "push the t to the target"][:batch],
    }


def noise(batch: int = 2, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(batch, CHUNK, MAX_ACTION)).astype(np.float32)


def test_lerobots_config_json_structures_and_round_trips() -> None:
    for kind, cls in KINDS.items():
        data = lerobot_config_data(cls())
        config = structure(json.loads(json.dumps(data)), PolicyConfig)
        assert type(config) is cls and config.type_name == kind
        assert lerobot_config_data(config) == data
    pi0, pi05 = PI0Config(), PI05Config()
    assert (pi0.chunk_size, pi0.num_inference_steps, pi0.tokenizer_max_length) == (50, 10, 48)
    assert pi05.tokenizer_max_length == 200
    assert pi05.normalization_mapping["STATE"] == "QUANTILES"
    assert pi0.image_resolution == (224, 224) and pi0.optimizer_lr == 2.5e-5
    assert pi0.vlm_sizes == GEMMA_VARIANTS["gemma_2b"]
    assert pi0.expert_sizes == GEMMA_VARIANTS["gemma_300m"]


def test_custom_variants_name_their_sizes_and_bad_ones_are_refused() -> None:
    sizes = gemma_sizes("custom:width=64,depth=3", where="paligemma_variant")
    assert (sizes.width, sizes.depth, sizes.head_dim) == (64, 3, 256)
    for bad in ("gemma_7b", "custom:width=x", "custom:colour=3", "custom:width=0"):
        with pytest.raises(ConfigError):
            gemma_sizes(bad, where="paligemma_variant")
    with pytest.raises(ConfigError, match="depth"):
        PI0Config(action_expert_variant="custom:depth=4")
    with pytest.raises(ConfigError, match="square"):
        PI0Config(image_resolution=(224, 160))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_saves_and_reloads_bit_exactly_and_predicts_deterministically(
    kind: str, tiny_paligemma_tokenizer: Path, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    policy = create_policy(tiny_config(kind), stats())
    with torch.no_grad():  # nothing zero-initialised may hide a mismatch
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    first = policy.predict_chunk(raw_batch(), noise=noise()).actions
    assert first.shape == (2, CHUNK, ACTION) and torch.isfinite(first).all()
    assert torch.equal(policy.predict_chunk(raw_batch(), noise=noise()).actions, first)
    assert not torch.allclose(policy.predict_chunk(raw_batch(), noise=noise(seed=9)).actions, first)
    other_task = {**raw_batch(), "task": ["put the bowl on the plate"] * 2}
    assert not torch.allclose(policy.predict_chunk(other_task, noise=noise()).actions, first)

    folder = policy.save(tmp_path / "pretrained_model")
    reloaded = load_policy_folder(folder)
    theirs = reloaded.model.state_dict()
    for key, value in policy.model.state_dict().items():
        assert torch.equal(value, theirs[key]), key
    assert torch.equal(reloaded.predict_chunk(raw_batch(), noise=noise()).actions, first)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_speed_paths_predict_the_chunks_of_the_plain_ones(
    kind: str, tiny_paligemma_tokenizer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inference's speed paths (`speed_paths`, on by default) leave the placeholder camera and
    the prompt's padding out of the prefix and compute π0.5's norm modulations for all the
    Euler steps at once: less work, the chunks of LeRobot's plain arithmetic."""
    torch.manual_seed(0)
    policy = create_policy(tiny_config(kind, empty_cameras=1), stats())
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    lengths: list[int] = []
    fill_cache = PaliGemmaWithExpertModel.fill_cache

    def spy(self, prefix, *args):  # type: ignore[no-untyped-def]
        lengths.append(prefix.shape[1])
        return fill_cache(self, prefix, *args)

    monkeypatch.setattr(PaliGemmaWithExpertModel, "fill_cache", spy)
    inner = policy.model.model
    final_norm = inner.paligemma_with_expert.gemma_expert.model.norm
    modulated: list[int] = []
    if kind == "pi05":
        final_norm.dense.register_forward_hook(lambda *_: modulated.append(1))
    raw = {**raw_batch(), "task": ["close the drawer", ""]}  # one prompt all but padding
    assert inner.speed_paths
    fast = policy.predict_chunk(raw, noise=noise()).actions
    fast_modulations = len(modulated)
    inner.speed_paths = False
    plain = policy.predict_chunk(raw, noise=noise()).actions
    patches = (28 // 14) ** 2
    assert lengths[1] == 2 * patches + 40  # the camera, the placeholder, the padded prompt
    assert lengths[0] < patches + 40
    if kind == "pi05":  # once per chunk, then once per Euler step (3)
        assert (fast_modulations, len(modulated) - fast_modulations) == (1, 3)
    torch.testing.assert_close(fast, plain, rtol=0, atol=1e-5)


def test_a_checkpoint_is_loaded_without_building_random_weights(
    tiny_paligemma_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = create_policy(tiny_config("pi0"), stats()).save(tmp_path / "pretrained_model")
    built_on: list[torch.device] = []
    init = PI0Policy.__init__

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, *args, **kwargs)
        built_on.append(next(self.parameters()).device)

    monkeypatch.setattr(PI0Policy, "__init__", spy)
    model = read_model(folder, read_config(folder))
    assert built_on == [torch.device("meta")]
    assert not any(t.is_meta for t in model.state_dict().values())
    assert not any(t.is_meta for t in model.buffers())


def test_the_processors_are_lerobots_and_pi05_writes_the_state_into_the_prompt(
    tiny_paligemma_tokenizer: Path,
) -> None:
    pi0 = create_policy(tiny_config("pi0"), stats())
    assert [step.name for step in pi0.preprocessor] == [
        "rename_observations_processor",
        "to_batch_processor",
        "pi0_new_line_processor",
        "tokenizer_processor",
        "device_processor",
        "relative_actions_processor",
        "normalizer_processor",
    ]
    pi05 = create_policy(tiny_config("pi05"), stats())
    assert [step.name for step in pi05.preprocessor] == [
        "rename_observations_processor",
        "to_batch_processor",
        "relative_actions_processor",
        "normalizer_processor",
        "pi05_prepare_state_tokenizer_processor_step",
        "tokenizer_processor",
        "device_processor",
    ]
    raw = raw_batch()
    prompt_step = pi05.preprocessor[4]
    normalized = pi05.preprocessor.steps[3]
    transition = prompt_step(
        normalized(pi05.preprocessor.steps[1](pi05.preprocessor.steps[0](_transition(raw))))
    )
    prompts = transition.complementary_data["task"]
    state = (raw["observation.state"] + 2.0) / 4.0 * 2 - 1  # q01 -2, q99 2 -> [-1, 1]
    bins = np.digitize(state, np.linspace(-1, 1, 257)[:-1]) - 1
    assert prompts[0] == (
        f"Task: close the drawer, State: {' '.join(map(str, bins[0]))};\nAction: "
    )
    tokens = pi05.preprocessor.process_batch(raw)["observation.language.tokens"]
    assert tokens.shape == (2, 40)


def _transition(raw: dict[str, object]):  # type: ignore[no-untyped-def]
    from rlctl.domain.frames import Transition

    observation = {k: v for k, v in raw.items() if k != "task"}
    return Transition(observation=observation, complementary_data={"task": raw["task"]})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_trains_on_a_fixed_batch_and_the_loss_goes_down(
    kind: str, tiny_paligemma_tokenizer: Path
) -> None:
    torch.manual_seed(0)
    policy = create_policy(tiny_config(kind, train_expert_only=True), stats())
    model = policy.model.train()
    raw = raw_batch()
    raw["action"] = np.random.default_rng(2).normal(size=(2, CHUNK, ACTION)).astype(np.float32)
    batch = policy.preprocessor.process_batch(raw)
    paligemma = model.model.paligemma_with_expert.paligemma
    assert all(not p.requires_grad for p in paligemma.parameters())
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=3e-3)

    def loss_at_fixed_noise() -> float:
        torch.manual_seed(123)  # the same noise and times every time
        with torch.no_grad():
            return float(model(batch)[0].item())

    before = loss_at_fixed_noise()
    for _ in range(25):
        loss, parts = model(batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        assert np.isfinite(parts["loss"])
    assert loss_at_fixed_noise() < 0.7 * before


def test_freezing_options_and_gradient_checkpointing(tiny_paligemma_tokenizer: Path) -> None:
    torch.manual_seed(0)
    config = tiny_config("pi05", freeze_vision_encoder=True, gradient_checkpointing=True)
    policy = create_policy(config, stats())
    model = policy.model.train()
    inner = model.model.paligemma_with_expert
    assert not inner.paligemma.model.vision_tower.training
    assert inner.paligemma.model.language_model.training
    raw = {**raw_batch(), "action": np.zeros((2, CHUNK, ACTION), np.float32)}
    loss, _ = model(policy.preprocessor.process_batch(raw))
    loss.backward()
    vision = list(inner.paligemma.model.vision_tower.parameters())
    assert all(p.grad is None and not p.requires_grad for p in vision)
    assert inner.expert_layers[0].input_layernorm.dense.weight.grad is not None
    assert inner.vlm_layers[0].self_attn.q_proj.weight.grad is not None
