"""π0-FAST at tiny sizes, built by rlctl: LeRobot's config.json and processor order, the action
tokens its pre-processor writes, learning (the loss goes down on a fixed batch), bit-exact
reloading, the same tokens on every decoding path, and one clear error for what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="π0-FAST needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.vla.pi0_fast import action_ids
from rlctl.domain.config import structure
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.config import lerobot_config_data
from rlctl.domain.policies.pi0_fast import PI0FastConfig

STATE, ACTION, CHUNK = 5, 3, 4
CAMERA = "observation.images.top"
VLM = (
    "custom:width=32,depth=2,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=1024,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)
# LeRobot 0.6.1's PI0FastConfig, as its config.json lists it.
LEROBOT_KEYS = [
    "type", "n_obs_steps", "input_features", "output_features", "device", "use_amp", "use_peft",
    "push_to_hub", "repo_id", "private", "tags", "license", "pretrained_path",
    "pretrained_revision", "paligemma_variant", "action_expert_variant", "dtype", "chunk_size",
    "n_action_steps", "max_state_dim", "max_action_dim", "max_action_tokens", "rtc_config",
    "image_resolution", "empty_cameras", "tokenizer_max_length", "text_tokenizer_name",
    "action_tokenizer_name", "temperature", "max_decoding_steps", "fast_skip_tokens",
    "validate_action_token_prefix", "use_kv_cache", "normalization_mapping",
    "gradient_checkpointing", "compile_model", "compile_mode", "optimizer_lr",
    "optimizer_betas", "optimizer_eps", "optimizer_weight_decay", "optimizer_grad_clip_norm",
    "scheduler_warmup_steps", "scheduler_decay_steps", "scheduler_decay_lr",
]  # fmt: skip


def tiny_config(fast: Path, **overrides: object) -> PI0FastConfig:
    fields: dict[str, object] = {
        "input_features": {
            "observation.state": typed_feature("STATE", (STATE,)),
            CAMERA: typed_feature("VISUAL", (3, 40, 56)),
        },
        "output_features": {"action": typed_feature("ACTION", (ACTION,))},
        "paligemma_variant": VLM,
        "chunk_size": CHUNK,
        "n_action_steps": CHUNK,
        "max_state_dim": 8,
        "max_action_dim": 8,
        "image_resolution": (28, 28),
        "tokenizer_max_length": 32,
        "max_action_tokens": 24,
        "max_decoding_steps": 12,
        "action_tokenizer_name": str(fast),
        "validate_action_token_prefix": False,
        **overrides,
    }
    return PI0FastConfig(**fields)  # type: ignore[arg-type]


def stats() -> dict[str, dict[str, np.ndarray]]:
    return {
        "observation.state": {"mean": np.linspace(-1, 1, STATE), "std": np.full(STATE, 2.0)},
        "action": {"mean": np.array([0.5, -0.5, 0.0]), "std": np.array([1.0, 2.0, 0.5])},
    }


def raw_batch(seed: int = 0, *, action: bool = False) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    raw: dict[str, object] = {
        "observation.state": rng.normal(size=(2, STATE)).astype(np.float32),
        CAMERA: rng.uniform(size=(2, 3, 40, 56)).astype(np.float32),
        "task": ["close the drawer", "push the t to the target"],
    }
    if action:
        chunk = np.cumsum(rng.normal(size=(2, CHUNK, ACTION)) * 0.3, axis=1)
        raw["action"] = (chunk * np.array([1.0, 2.0, 0.5]) + [0.5, -0.5, 0.0]).astype(np.float32)
    return raw


@pytest.fixture
def policy(tiny_fast_text_tokenizer: Path, tiny_fast_tokenizer_dir: Path):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    made = create_policy(tiny_config(tiny_fast_tokenizer_dir), stats())
    with torch.no_grad():
        for param in made.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    return made


def test_lerobots_config_json_structures_and_round_trips(tmp_path: Path) -> None:
    config = tiny_config(tmp_path)
    data = {"type": "pi0_fast", **lerobot_config_data(config)}
    assert list(data) == LEROBOT_KEYS
    again = structure(json.loads(json.dumps(data)), PolicyConfig)
    assert again == config
    with pytest.raises(ConfigError, match="temperature"):
        tiny_config(tmp_path, temperature=-1.0)
    with pytest.raises(ConfigError, match="n_action_steps"):
        tiny_config(tmp_path, n_action_steps=CHUNK + 1)
    with pytest.raises(ConfigError, match="cannot read 'widht=3'"):
        tiny_config(tmp_path, paligemma_variant="custom:widht=3")


def test_the_processors_are_lerobots_and_write_prompt_and_action_tokens(policy) -> None:  # type: ignore[no-untyped-def]
    assert [step.name for step in policy.preprocessor] == [
        "rename_observations_processor",
        "to_batch_processor",
        "relative_actions_processor",
        "normalizer_processor",
        "pi0_fast_prepare_state_tokenizer_processor_step",
        "tokenizer_processor",
        "action_tokenizer_processor",
        "device_processor",
    ]
    assert [step.name for step in policy.postprocessor] == [
        "unnormalizer_processor",
        "absolute_actions_processor",
        "device_processor",
    ]
    raw = raw_batch(action=True)
    batch = policy.preprocessor.process_batch(raw)
    text = policy.model.text_ids
    tokens, mask = batch["action.tokens"], batch["action.token_mask"]
    assert tokens.shape == mask.shape == (2, 24) and tokens.dtype == torch.int64
    length = int(mask[0].sum())
    row = tokens[0, :length].tolist()
    assert row[: 1 + len(text.prefix)] == [text.bos, *text.prefix]
    assert tuple(row[-len(text.end) :]) == text.end
    assert not tokens[0, length:].any()
    fast = text.fast_to_text(torch.tensor(row[1 + len(text.prefix) : -len(text.end)]), 128)
    decoded = policy.model.action_tokenizer.decode(fast.tolist(), CHUNK, ACTION)
    assert np.abs(decoded - batch["action"][0].numpy()).max() < 0.1
    # Without an action (inference), no action tokens, and the prompt holds the state's bins.
    prompt_only = policy.preprocessor.process_batch(raw_batch())
    assert "action.tokens" not in prompt_only
    assert prompt_only["observation.language.tokens"].shape == (2, 32)


def test_trains_on_a_fixed_batch_and_the_loss_goes_down(policy) -> None:  # type: ignore[no-untyped-def]
    model = policy.model.train()
    batch = policy.preprocessor.process_batch(raw_batch(action=True))
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    with torch.no_grad():
        before = float(model(batch)[0])
    for _ in range(15):
        loss, parts = model(batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        assert np.isfinite(parts["ce_loss"])
    with torch.no_grad():
        assert float(model(batch)[0]) < 0.5 * before
    model.eval()


def test_reloads_bit_exactly_and_every_decoding_path_writes_the_same_tokens(
    policy, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    folder = policy.save(tmp_path / "model")
    loaded = load_policy_folder(folder)
    ours, theirs = policy.model.state_dict(), loaded.model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    batch = policy._preprocess(raw_batch())
    tokens = policy.model.generate(batch)
    assert torch.equal(loaded.model.generate(batch), tokens)
    loaded.model.model.speed_paths = False
    assert torch.equal(loaded.model.generate(batch), tokens)
    # Without the cache every step runs (no early stop): the same tokens up to each row's "|".
    loaded.model.config = loaded.model.model.config = tiny_config(
        Path(policy.config.action_tokenizer_name), use_kv_cache=False
    )
    whole = loaded.model.generate(batch)
    end = loaded.model.text_ids.end_of_action
    for ours_row, whole_row in zip(tokens.tolist(), whole.tolist(), strict=True):
        stop = ours_row.index(end) + 1 if end in ours_row else len(ours_row)
        assert ours_row[:stop] == whole_row[:stop]
    chunk = policy.predict_chunk(raw_batch()).actions
    assert chunk.shape == (2, CHUNK, ACTION) and torch.isfinite(chunk).all()


def in_file_mapping(param: torch.Tensor) -> bool:
    from rlctl.adapters.policies.vla.loading import _file_mappings

    start = param.data_ptr()
    end = start + param.numel() * param.element_size()
    return any(low <= start and end <= high for low, high in _file_mappings())


def test_decoding_reads_the_language_model_from_process_memory(policy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A loaded checkpoint's language model layers and lm_head (read whole once per decoded
    token) are copied out of the file's memory map; the vision tower (read once per chunk) and
    the token embeddings (a row per token) stay mapped; the weights and tokens are the same."""
    folder = policy.save(tmp_path / "model")
    loaded = load_policy_folder(folder)
    parts = loaded.model.model.paligemma_with_expert
    paligemma = parts.paligemma
    decoder = [*parts.vlm_layers.parameters(), *paligemma.lm_head.parameters()]
    assert not any(in_file_mapping(p) for p in decoder)
    assert any(in_file_mapping(p) for p in paligemma.model.vision_tower.parameters())
    assert in_file_mapping(paligemma.model.language_model.embed_tokens.weight)
    ours, theirs = policy.model.state_dict(), loaded.model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    batch = policy._preprocess(raw_batch())
    assert torch.equal(loaded.model.generate(batch), policy.model.generate(batch))


def recorded_logits(policy, batch, *, speed: bool) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[no-untyped-def]
    """The generated tokens and the logits each decoding step picked them from."""
    model = policy.model.model
    model.speed_paths = speed
    parts = model.paligemma_with_expert
    seen: list[torch.Tensor] = []
    logits = type(parts).logits

    def record(hidden: torch.Tensor) -> torch.Tensor:
        out = logits(parts, hidden)
        seen.append(out[:, -1])
        return out

    parts.logits = record
    try:
        tokens = policy.model.generate(batch)
    finally:
        del parts.logits
        model.speed_paths = True
    return tokens, torch.stack(seen, dim=1)


@pytest.mark.parametrize(("rows", "dtype"), [(1, "float32"), (2, "float32"), (2, "bfloat16")])
def test_the_decoding_speed_path_picks_from_the_same_logits(
    rows: int, dtype: str, tiny_fast_text_tokenizer: Path, tiny_fast_tokenizer_dir: Path
) -> None:
    """Buffers written in place, rotary tables made once, fused attention and (one row, no
    padding) no mask: the same logits at every step as the reference decoding over the whole
    padded prompt, hence the same tokens."""
    torch.manual_seed(0)
    # the bfloat16 path itself, whatever this CPU (`compute_dtype` keep)
    config = tiny_config(tiny_fast_tokenizer_dir, dtype=dtype, compute_dtype="keep")
    made = create_policy(config, stats())
    with torch.no_grad():
        for param in made.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    raw = raw_batch(3)
    one = {k: v[:rows] for k, v in raw.items()}  # type: ignore[index]
    batch = made._preprocess(one)
    with torch.no_grad():
        fast_tokens, fast = recorded_logits(made, batch, speed=True)
        plain_tokens, plain = recorded_logits(made, batch, speed=False)
    assert fast.shape == plain.shape and fast.shape[:2] == (rows, 12)
    # bfloat16 rounds differently on the two paths: a near tie may then go the other way, after
    # which the inputs differ; up to there, the same logits and tokens.
    tolerance = (1e-4 if dtype == "float32" else 0.05) * float(plain.abs().max())
    for row in range(rows):
        for step in range(12):
            ours, theirs = fast[row, step].float(), plain[row, step].float()
            assert (ours - theirs).abs().max() <= tolerance
            picked = int(fast_tokens[row, step])
            if picked != int(plain_tokens[row, step]):
                assert dtype == "bfloat16" and theirs[picked] >= theirs.max() - 2 * tolerance
                break


@pytest.mark.parametrize("kv_heads", [1, 2, 8])
@pytest.mark.parametrize("queries", [1, 6])
def test_grouped_and_fused_attention_equal_attention_over_repeated_keys(
    kv_heads: int, queries: int
) -> None:
    from rlctl.adapters.policies.vla.backbones.paligemma import (
        ATTENTION_MASK_VALUE,
        attend,
        attend_sdpa,
    )

    generator = torch.Generator().manual_seed(0)
    heads, keys, dim = 8, 9, 16
    query = torch.randn(2, heads, queries, dim, generator=generator)
    key = torch.randn(2, kv_heads, keys, dim, generator=generator)
    value = torch.randn(2, kv_heads, keys, dim, generator=generator)
    seen = torch.rand(2, 1, queries, keys, generator=generator) > 0.3
    seen[..., 0] = True
    mask = torch.where(seen, 0.0, ATTENTION_MASK_VALUE)
    repeated_k = key.repeat_interleave(heads // kv_heads, dim=1)
    repeated_v = value.repeat_interleave(heads // kv_heads, dim=1)
    scores = query @ repeated_k.transpose(2, 3) / dim**0.5 + mask
    expected = (scores.softmax(-1) @ repeated_v).transpose(1, 2).reshape(2, queries, -1)
    torch.testing.assert_close(attend(query, key, value, mask), expected)
    torch.testing.assert_close(attend_sdpa(query, key, value, mask), expected)
    all_seen = (query @ repeated_k.transpose(2, 3) / dim**0.5).softmax(-1) @ repeated_v
    torch.testing.assert_close(
        attend_sdpa(query, key, value, None), all_seen.transpose(1, 2).reshape(2, queries, -1)
    )


def test_text_without_action_prefix_is_refused_when_validated(policy) -> None:  # type: ignore[no-untyped-def]
    text = policy.model.text_ids
    with pytest.raises(InvalidInput, match="does not start with 'Action:'") as caught:
        action_ids([5, 6, 7], text, validate=True)
    assert "validate_action_token_prefix=false" in (caught.value.hint or "")
    fast_ids = [900, 901]
    written = [*text.prefix, *fast_ids, text.end_of_action, 1, 0, 0]
    assert action_ids(written, text, validate=True) == fast_ids
    assert action_ids([*fast_ids, *text.prefix, 7], text, validate=False) == [*fast_ids, 7]


def test_real_time_chunking_and_a_missing_tokenizer_are_refused(
    tiny_fast_text_tokenizer: Path, tiny_fast_tokenizer_dir: Path, tmp_path: Path
) -> None:
    from rlctl.adapters.policies.base import build_policy

    with pytest.raises(ConfigError, match="real-time chunking"):
        build_policy(tiny_config(tiny_fast_tokenizer_dir, rtc_config={"enabled": True}))
    with pytest.raises(ConfigError, match="not a FAST tokenizer folder") as caught:
        build_policy(tiny_config(tmp_path))
    assert "rlctl train-tokenizer" in (caught.value.hint or "")
