"""SmolVLA on a tiny SmolVLM made offline: it trains, saves and reloads bit-exactly (weights
loaded onto a meta-built model), predicts deterministically with fixed noise, and reads the task
through LeRobot's tokenizer step; the config round-trips LeRobot's config.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import structlog
import torch

pytest.importorskip("transformers", reason="SmolVLA needs the smolvla extra")

from rlctl.adapters.policies.checkpoint import read_config, read_model
from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.vla.smolvla import SmolVLAPolicy
from rlctl.domain.config import structure
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.config import lerobot_config_data
from rlctl.domain.policies.smolvla import SmolVLAConfig

STATE, ACTION = 5, 3
CAMERA = "observation.images.top"


def tiny_config(vlm: Path, **overrides: object) -> SmolVLAConfig:
    fields: dict[str, object] = {
        "input_features": {
            "observation.state": typed_feature("STATE", (STATE,)),
            CAMERA: typed_feature("VISUAL", (3, 48, 64)),
        },
        "output_features": {"action": typed_feature("ACTION", (ACTION,))},
        "vlm_model_name": str(vlm),
        "num_vlm_layers": 4,
        "chunk_size": 4,
        "n_action_steps": 4,
        "max_state_dim": 8,
        "max_action_dim": 6,
        "num_steps": 3,
        "resize_imgs_with_padding": (64, 64),
        "tokenizer_max_length": 16,
        **overrides,
    }
    return SmolVLAConfig(**fields)  # type: ignore[arg-type]


def stats() -> dict[str, dict[str, np.ndarray]]:
    return {
        "observation.state": {"mean": np.linspace(-1, 1, STATE), "std": np.full(STATE, 2.0)},
        "action": {"mean": np.array([0.5, -0.5, 0.0]), "std": np.array([1.0, 2.0, 0.5])},
    }


def raw_batch(batch: int = 2, seed: int = 0) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    return {
        "observation.state": rng.normal(size=(batch, STATE)).astype(np.float32),
        CAMERA: rng.uniform(size=(batch, 3, 48, 64)).astype(np.float32),
        "task": ["close the drawer", "push the t to the target"][:batch],
    }


def noise(batch: int = 2, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, 4, 6)).astype(np.float32)


def test_lerobots_config_json_structures_and_round_trips() -> None:
    data = lerobot_config_data(SmolVLAConfig())
    data["rtc_config"] = None
    config = structure(json.loads(json.dumps(data)), PolicyConfig)
    assert isinstance(config, SmolVLAConfig)
    assert lerobot_config_data(config) == data
    defaults = SmolVLAConfig()
    assert (defaults.chunk_size, defaults.n_action_steps, defaults.num_steps) == (50, 50, 10)
    assert defaults.normalization_mapping["VISUAL"] == "IDENTITY"
    assert defaults.resize_imgs_with_padding == (512, 512)
    assert defaults.vlm_model_name == "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"


def test_the_pre_processor_tokenises_the_task_after_a_newline(tiny_smolvlm: Path) -> None:
    policy = create_policy(tiny_config(tiny_smolvlm), stats())
    names = [step.name for step in policy.preprocessor]
    assert names == [
        "rename_observations_processor",
        "to_batch_processor",
        "smolvla_new_line_processor",
        "tokenizer_processor",
        "device_processor",
        "normalizer_processor",
    ]
    batch = policy.preprocessor.process_batch(raw_batch())
    tokens = batch["observation.language.tokens"]
    mask = batch["observation.language.attention_mask"]
    assert tokens.dtype == torch.int64 and mask.dtype == torch.bool
    assert tokens.shape == mask.shape and tokens.shape[0] == 2
    tokenizer = policy.preprocessor[3].tokenizer
    first = tokenizer("close the drawer\n")["input_ids"]
    # Padded on the right to the longest task of the batch.
    assert tokens[0, : len(first)].tolist() == first
    assert mask[0].sum() == len(first) and not mask[0, len(first) :].any()
    assert mask[1].all()


def test_trains_on_a_fixed_batch_and_the_loss_goes_down(tiny_smolvlm: Path) -> None:
    torch.manual_seed(0)
    config = tiny_config(tiny_smolvlm)
    policy = create_policy(config, stats())
    model = policy.model.train()
    raw = raw_batch()
    rng = np.random.default_rng(2)
    raw["action"] = rng.normal(size=(2, 4, ACTION)).astype(np.float32)
    raw["action_is_pad"] = np.array([[False] * 4, [False, False, True, True]])
    batch = policy.preprocessor.process_batch(raw)
    batch["action_is_pad"] = torch.as_tensor(raw["action_is_pad"])
    trainable = [p for p in model.parameters() if p.requires_grad]
    # train_expert_only: the VLM stays frozen, the expert and the projections learn.
    assert all(not p.requires_grad for p in model.model.vlm_with_expert.vlm.parameters())
    assert trainable
    optimiser = torch.optim.AdamW(trainable, lr=3e-3)

    def loss_at_fixed_noise() -> float:
        torch.manual_seed(123)  # the same noise and times every time
        with torch.no_grad():
            return model(batch)[0].item()

    before = loss_at_fixed_noise()
    for _ in range(25):
        loss, parts = model(batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        assert np.isfinite(parts["loss"])
    after = loss_at_fixed_noise()
    assert after < 0.7 * before, (before, after)


def test_saves_and_reloads_bit_exactly_and_predicts_deterministically(
    tiny_smolvlm: Path, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    policy = create_policy(tiny_config(tiny_smolvlm), stats())
    first = policy.predict_chunk(raw_batch(), noise=noise()).actions
    again = policy.predict_chunk(raw_batch(), noise=noise()).actions
    assert first.shape == (2, 4, ACTION)
    assert torch.equal(first, again)
    other = policy.predict_chunk(raw_batch(), noise=noise(seed=9)).actions
    assert not torch.allclose(first, other)

    folder = policy.save(tmp_path / "pretrained_model")
    reloaded = load_policy_folder(folder)
    theirs = reloaded.model.state_dict()
    for key, value in policy.model.state_dict().items():
        assert torch.equal(value, theirs[key]), key
    assert torch.equal(reloaded.predict_chunk(raw_batch(), noise=noise()).actions, first)
    # Frozen parts stay frozen after loading onto the meta-built model.
    grads = {n: p.requires_grad for n, p in reloaded.model.named_parameters()}
    assert grads == {n: p.requires_grad for n, p in policy.model.named_parameters()}


def test_a_checkpoint_is_loaded_without_building_random_weights(
    tiny_smolvlm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = create_policy(tiny_config(tiny_smolvlm), stats())
    folder = policy.save(tmp_path / "pretrained_model")
    config = read_config(folder)
    built_on: list[torch.device] = []
    init = SmolVLAPolicy.__init__

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, *args, **kwargs)
        built_on.append(next(self.parameters()).device)

    monkeypatch.setattr(SmolVLAPolicy, "__init__", spy)
    model = read_model(folder, config)
    assert built_on == [torch.device("meta")]
    assert not any(t.is_meta for t in model.state_dict().values())
    assert model.device == torch.device("cpu")


def test_a_batch_without_task_text_warns_once_and_still_acts(tiny_smolvlm: Path) -> None:
    policy = create_policy(tiny_config(tiny_smolvlm), stats())
    raw = raw_batch()
    del raw["task"]
    with structlog.testing.capture_logs() as logs:
        first = policy.predict_chunk(raw, noise=noise()).actions
        empty = policy.predict_chunk({**raw, "task": ["", ""]}, noise=noise()).actions
    warnings = [e for e in logs if e["log_level"] == "warning" and "task" in e["event"]]
    assert len(warnings) == 1
    assert torch.isfinite(first).all() and first.shape == (2, 4, ACTION)
    assert torch.isfinite(empty).all()


def test_one_task_string_serves_the_whole_batch(tiny_smolvlm: Path) -> None:
    policy = create_policy(tiny_config(tiny_smolvlm), stats())
    raw = raw_batch()
    one = policy.predict_chunk({**raw, "task": "close the drawer"}, noise=noise()).actions
    listed = policy.predict_chunk(
        {**raw, "task": ("close the drawer", "close the drawer")}, noise=noise()
    ).actions
    assert torch.equal(one, listed)


def test_fewer_expert_layers_and_self_attention_build_and_train(tiny_smolvlm: Path) -> None:
    for overrides in (
        # Expert layer i runs beside VLM layer 2i, every layer cross-attending.
        {
            "num_expert_layers": 2,
            "self_attn_every_n_layers": -1,
            "train_expert_only": False,
            "freeze_vision_encoder": False,
        },
        {"attention_mode": "self_attn", "self_attn_every_n_layers": -1},
        {"add_image_special_tokens": True, "expert_width_multiplier": 0.5},
    ):
        torch.manual_seed(0)
        policy = create_policy(tiny_config(tiny_smolvlm, **overrides), stats())
        raw = {**raw_batch(), "action": np.zeros((2, 4, ACTION), np.float32)}
        batch = policy.preprocessor.process_batch(raw)
        loss, _ = policy.model.train()(batch)
        loss.backward()
        chunk = policy.predict_chunk(raw_batch(), noise=noise()).actions
        assert torch.isfinite(chunk).all(), overrides


def test_a_pretrained_vlm_loads_in_bfloat16_and_its_checkpoint_reloads_the_same(
    tiny_smolvlm: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    torch.manual_seed(0)
    # LeRobot's dtypes, whatever this CPU's bfloat16 (`compute_dtype` keep).
    config = tiny_config(tiny_smolvlm, load_vlm_weights=True, compute_dtype="keep")
    policy = create_policy(config, stats())
    vlm = policy.model.model.vlm_with_expert.vlm
    pretrained = load_file(str(tiny_smolvlm / "model.safetensors"))
    ours = vlm.state_dict()
    assert {t.dtype for t in vlm.parameters()} == {torch.bfloat16}
    for key, value in pretrained.items():
        if key in ours:  # the layers past num_vlm_layers are dropped
            assert torch.equal(ours[key], value.to(torch.bfloat16)), key
    first = policy.predict_chunk(raw_batch(), noise=noise()).actions

    reloaded = load_policy_folder(policy.save(tmp_path / "pretrained_model"), compute_dtype="keep")
    dtypes = {n: t.dtype for n, t in policy.model.state_dict().items()}
    assert {n: t.dtype for n, t in reloaded.model.state_dict().items()} == dtypes
    assert torch.equal(reloaded.predict_chunk(raw_batch(), noise=noise()).actions, first)


def test_the_experts_projections_of_the_prefix_are_made_once_per_chunk(
    tiny_smolvlm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In cross-attention layers the expert projects the cached VLM keys and values: the same
    at every Euler step, so made once per chunk (on both inference paths) — with the very same
    actions as projecting them again at every step."""
    from rlctl.adapters.policies.vla import smolvla

    torch.manual_seed(0)
    policy = create_policy(tiny_config(tiny_smolvlm, num_steps=4), stats())
    experts = policy.model.model.vlm_with_expert
    cross = [
        layer.self_attn.k_proj
        for index, layer in enumerate(experts.lm_expert.layers)
        if not experts._joint_layer(index)
    ]
    assert cross  # tiny_config interleaves cross-attention layers
    calls: list[int] = []
    for proj in cross:
        proj.register_forward_hook(lambda *_: calls.append(1))
    reused = policy.predict_chunk(raw_batch(), noise=noise()).actions
    assert len(calls) == len(cross)  # not once per step
    policy.model.model.speed_paths = False
    calls.clear()
    plain = policy.predict_chunk(raw_batch(), noise=noise()).actions
    assert len(calls) == len(cross)

    class Forgetful(dict):  # the cache as it was: projected again at every step
        def __setitem__(self, key, value) -> None:
            pass

    original = smolvla.PrefixCache.__init__

    def forgetful_init(self) -> None:
        original(self)
        self.expert_kv = Forgetful()

    monkeypatch.setattr(smolvla.PrefixCache, "__init__", forgetful_init)
    calls.clear()
    again = policy.predict_chunk(raw_batch(), noise=noise()).actions
    assert len(calls) == 4 * len(cross)
    assert torch.equal(plain, again)
    torch.testing.assert_close(reused, again, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # cross-attention, a joint layer every second one
        {"num_expert_layers": 2, "self_attn_every_n_layers": -1},  # experts beside 2 layers of 4
        {"attention_mode": "self_attn", "add_image_special_tokens": True},
    ],
    ids=["cross", "fewer-experts", "self"],
)
def test_the_speed_paths_predict_the_chunks_of_the_plain_ones(
    tiny_smolvlm: Path, monkeypatch: pytest.MonkeyPatch, overrides: dict[str, object]
) -> None:
    """Inference's speed paths (`speed_paths`, on by default) leave the placeholder camera and
    the prompt's padding out of the prefix, stop the VLM's last layer at its keys and values
    and run the expert alone over the cached prefix: less work, the chunks of LeRobot's plain
    arithmetic (the slow path, `speed_paths = False`)."""
    from rlctl.adapters.policies.vla.backbones.smolvlm import SmolVLMWithExpertModel

    torch.manual_seed(0)
    config = tiny_config(
        tiny_smolvlm,
        empty_cameras=1,
        pad_language_to="max_length",
        tokenizer_max_length=48,
        **overrides,
    )
    policy = create_policy(config, stats())
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    lengths: list[int] = []
    fill_cache = SmolVLMWithExpertModel.fill_cache

    def spy(self, prefix, *args):  # type: ignore[no-untyped-def]
        lengths.append(prefix.shape[1])
        return fill_cache(self, prefix, *args)

    monkeypatch.setattr(SmolVLMWithExpertModel, "fill_cache", spy)
    inner = policy.model.model
    assert inner.speed_paths
    raw = raw_batch()
    fast = policy.predict_chunk(raw, noise=noise()).actions
    inner.speed_paths = False
    plain = policy.predict_chunk(raw, noise=noise()).actions
    image_tokens = inner.vlm_with_expert.embed_image(torch.zeros(1, 3, 64, 64)).shape[1]
    assert lengths == [lengths[0]]  # the plain path does not call it
    # The camera (and its 3 special tokens), a prompt of fewer than 48 tokens, the state: no
    # placeholder camera, no padding.
    assert image_tokens + 1 < lengths[0] < image_tokens + 3 + 48 + 1
    torch.testing.assert_close(fast, plain, rtol=0, atol=1e-5)
