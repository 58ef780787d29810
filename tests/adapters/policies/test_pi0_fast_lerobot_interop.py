"""π0-FAST checkpoints and FAST tokens both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON
names a Python with lerobot[pi]==0.6.1).

- A checkpoint LeRobot makes generates in rlctl the token ids LeRobot generates (greedy, the same
  ids to the last) for the same raw inputs and task text, and decodes them into the same chunk;
  a checkpoint rlctl saves does the same in LeRobot, and its training loss on a batch is
  LeRobot's (rlctl's processors wrote the action tokens LeRobot's write).
- A valid generated sequence ("Action: ", FAST ids, "|", <eos>) decodes into the same chunk.
- The FAST tokenizer rlctl fits and saves gives, loaded by LeRobot's own code (AutoProcessor with
  trust_remote_code: the processor file rlctl writes beside it), the ids rlctl gives; with
  RLCTL_FAST_REFERENCE_DIR naming a copy of the Hub's `lerobot/fast-action-tokenizer` folder (its
  `processing_action_tokenizer.py`), that code fits a tokenizer on the same chunks and both the
  BPE and the ids must equal rlctl's.

LeRobot builds at tiny sizes through the harness's patches (lerobot_pi0_fast.py); both read one
tiny local PaliGemma tokenizer (with reserved ids for the action tokens) under its Hub name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="π0-FAST needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.vla.fast import FASTTokenizer
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.pi0_fast import PI0FastConfig

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_pi0_fast.py"
TOLERANCE = 1e-4
VLM = (
    "custom:width=32,depth=2,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=1024,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)

SPECS: dict[str, dict[str, Any]] = {
    "one camera, cached decoding": {
        "cameras": {"observation.images.top": [3, 40, 56]},
        "state_dim": 5,
        "action_dim": 3,
        "tasks": ["close the drawer", "push the t to the target"],
        "config": {"chunk_size": 4, "n_action_steps": 4, "max_state_dim": 8,
                   "max_action_dim": 8, "tokenizer_max_length": 32, "max_action_tokens": 24,
                   "max_decoding_steps": 12},
    },
    "two cameras and an empty one, whole-sequence decoding, quantiles, 3 of 4 steps": {
        "cameras": {"observation.images.top": [3, 28, 28], "observation.images.wrist": [3, 30, 20]},
        "state_dim": 7,
        "action_dim": 3,
        "tasks": ["put the bowl on the plate", ""],
        "config": {"chunk_size": 4, "n_action_steps": 3, "max_state_dim": 8,
                   "max_action_dim": 8, "tokenizer_max_length": 40, "max_action_tokens": 20,
                   "max_decoding_steps": 10, "empty_cameras": 1, "use_kv_cache": False,
                   "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "QUANTILES",
                                             "ACTION": "QUANTILES"}},
    },
}  # fmt: skip


def write_inputs(path: Path, spec: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    horizon = spec["config"]["chunk_size"]
    inputs: dict[str, Any] = {
        "observation.state": rng.normal(size=(2, spec["state_dim"])).astype(np.float32),
        # Smooth chunks near the statistics' range, as a dataset's would be.
        "action": np.cumsum(rng.normal(size=(2, horizon, spec["action_dim"])) * 0.3, axis=1).astype(
            np.float32
        ),
        "task": np.array(spec["tasks"]),
    }
    for key, shape in spec["cameras"].items():
        inputs[key] = rng.uniform(size=(2, *shape)).astype(np.float32)
    np.savez(path, **inputs)
    return inputs


def observation(inputs: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in inputs.items() if k not in ("task", "action")}
    out["task"] = [str(t) for t in inputs["task"]]
    return out


def rlctl_run(policy, inputs: dict[str, Any]) -> tuple[np.ndarray, list[list[int]]]:
    chunk = policy.predict_chunk(observation(inputs)).actions.numpy()
    batch = policy._preprocess(observation(inputs))
    return chunk, policy.model.generate(batch).tolist()


def rlctl_loss(policy, inputs: dict[str, Any]) -> float:
    raw = {**observation(inputs), "action": torch.from_numpy(inputs["action"])}
    batch = policy._preprocess(raw)
    policy.model.train()
    try:
        loss, _ = policy.model(batch)
    finally:
        policy.model.eval()
    return loss.item()


def random_stats(spec: dict[str, Any], seed: int) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    stats = {}
    for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"])):
        low = rng.normal(size=dim) - 2
        stats[key] = {
            "mean": rng.normal(size=dim),
            "std": rng.uniform(0.5, 2, size=dim),
            "q01": low,
            "q99": low + rng.uniform(1, 4, size=dim),
        }
    return stats


def valid_sequence(policy, chunk: np.ndarray, length: int) -> list[int]:
    """What a trained π0-FAST writes for `chunk`: "Action: ", its FAST ids, "|", <eos>, then 0."""
    text = policy.model.text_ids
    fast = torch.tensor(policy.model.action_tokenizer.encode(chunk)[0])
    ids = [*text.prefix, *text.fast_to_text(fast, 128).tolist(), *text.end]
    return (ids + [0] * length)[:length]


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_generate_the_same_tokens_and_chunks_in_both_tools(
    name: str, lerobot, tiny_fast_text_tokenizer: Path, tiny_fast_tokenizer_dir: Path, tmp_path
) -> None:
    spec = {**SPECS[name], "seed": 7}
    spec["config"] = {
        "paligemma_variant": VLM,
        "image_resolution": [28, 28],
        "action_tokenizer_name": str(tiny_fast_tokenizer_dir),
        # Random weights write no "Action:": the check would refuse every sequence.
        "validate_action_token_prefix": False,
        **spec["config"],
    }
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec, seed=3)
    text_tokenizer = tiny_fast_text_tokenizer

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(LEROBOT_SCRIPT, "make", theirs, text_tokenizer, json.dumps(spec), inputs_path)
    loaded = load_policy_folder(theirs)
    chunk, tokens = rlctl_run(loaded, inputs)
    assert tokens == made["tokens"]
    diff = float(np.abs(chunk - np.array(made["chunk"])).max())
    print(f"{name}: LeRobot checkpoint in rlctl, same tokens, chunk max abs diff {diff:.3g}")
    assert diff <= TOLERANCE
    loaded.model.model.speed_paths = False
    assert rlctl_run(loaded, inputs)[1] == made["tokens"]

    # rlctl's checkpoint (its own random weights and statistics), in LeRobot.
    torch.manual_seed(11)
    config = PI0FastConfig(
        input_features={
            "observation.state": typed_feature("STATE", (spec["state_dim"],)),
            **{k: typed_feature("VISUAL", tuple(s)) for k, s in spec["cameras"].items()},
        },
        output_features={"action": typed_feature("ACTION", (spec["action_dim"],))},
        device="cpu",
        **spec["config"],
    )
    policy = create_policy(config, random_stats(spec, seed=5))
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    folder = policy.save(tmp_path / "rlctl_model")
    chunk, tokens = rlctl_run(policy, inputs)
    length = spec["config"]["max_decoding_steps"]
    normalised = normalised_actions(policy, inputs)
    sequences = [valid_sequence(policy, normalised[i], length) for i in range(2)]
    (tmp_path / "tokens.json").write_text(json.dumps(sequences))
    got = lerobot(
        LEROBOT_SCRIPT, "predict", folder, text_tokenizer, inputs_path, tmp_path / "tokens.json"
    )
    assert got["tokens"] == tokens
    diff = float(np.abs(chunk - np.array(got["chunk"])).max())
    print(f"{name}: rlctl checkpoint in LeRobot, same tokens, chunk max abs diff {diff:.3g}")
    assert diff <= TOLERANCE
    ours_loss = rlctl_loss(policy, inputs)
    print(f"{name}: training loss rlctl {ours_loss:.6f}, LeRobot {got['loss']:.6f}")
    assert abs(ours_loss - got["loss"]) <= TOLERANCE
    decoded = policy.model.detokenize(torch.tensor(sequences)).numpy()
    assert np.abs(decoded - np.array(got["detokenized"])).max() <= 1e-6
    if (
        spec["config"]["n_action_steps"] == spec["config"]["chunk_size"]
        and "normalization_mapping" not in spec["config"]
    ):
        # And they are the chunk that was written (FAST's rounding aside); quantile-normalised
        # random actions fall outside what the test's tokenizer was fitted on.
        assert np.abs(decoded - normalised).max() < 0.2


def normalised_actions(policy, inputs: dict[str, Any]) -> np.ndarray:
    raw = {**observation(inputs), "action": torch.from_numpy(inputs["action"])}
    return policy._preprocess(raw)["action"].numpy()


@pytest.mark.lerobot
@pytest.mark.slow
def test_lerobots_processor_code_gives_rlctls_fast_tokens(lerobot, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    train = np.cumsum(rng.normal(size=(400, 10, 5)) * 0.25, axis=1)
    test = np.cumsum(rng.normal(size=(60, 10, 5)) * 0.25, axis=1).astype(np.float32)
    ours = FASTTokenizer.fit(list(train), scale=10.0, vocab_size=512)
    folder = ours.save(tmp_path / "fast")
    np.save(tmp_path / "test.npy", test)
    expected = ours.encode(test)

    theirs = lerobot(LEROBOT_SCRIPT, "tokens", folder, tmp_path / "test.npy")["tokens"]
    assert theirs == expected

    reference = os.environ.get("RLCTL_FAST_REFERENCE_DIR")
    if not reference:
        pytest.skip("set RLCTL_FAST_REFERENCE_DIR to a copy of lerobot/fast-action-tokenizer")
    np.save(tmp_path / "train.npy", train)
    fitted = tmp_path / "reference_fit"
    lerobot(LEROBOT_SCRIPT, "fit", reference, tmp_path / "train.npy", 512, fitted)
    bpe = json.loads((fitted / "bpe_tokenizer" / "tokenizer.json").read_text())
    assert bpe == json.loads((folder / "bpe_tokenizer" / "tokenizer.json").read_text())
    config = json.loads((fitted / "processor_config.json").read_text())
    assert config["min_token"] == ours.min_token
    theirs = lerobot(LEROBOT_SCRIPT, "tokens", fitted, tmp_path / "test.npy")["tokens"]
    assert theirs == expected


@pytest.mark.lerobot
@pytest.mark.slow
def test_train_tokenizer_writes_the_tokenizer_lerobots_script_writes(
    lerobot, fixtures_dir: Path, tmp_path: Path
) -> None:
    """`rlctl train-tokenizer` and `lerobot-train-tokenizer` (its processor code from
    RLCTL_FAST_REFERENCE_DIR) on the same dataset and settings: the same files, byte for byte
    but the processor code."""
    reference = os.environ.get("RLCTL_FAST_REFERENCE_DIR")
    if not reference:
        pytest.skip("set RLCTL_FAST_REFERENCE_DIR to a copy of lerobot/fast-action-tokenizer")
    from click.testing import CliRunner

    from rlctl.entrypoints.cli.main import cli

    settings = {
        "repo_id": "lerobot/sim_video",
        "root": str(fixtures_dir / "sim_video"),
        "action_horizon": 4,
        "encoded_dims": "0:2,3:6",
        "sample_fraction": 0.5,
        "vocab_size": 400,
        "use_relative_transform": True,
        "relative_dims": "0,3",
        "normalization_mode": "MEAN_STD",
    }
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    lerobot(
        LEROBOT_SCRIPT,
        "train-tokenizer",
        reference,
        json.dumps({**settings, "output_dir": str(theirs)}),
        env=env,
    )
    args = [f"--{key}={str(value).lower() if isinstance(value, bool) else value}"
            for key, value in settings.items()]  # fmt: skip
    result = CliRunner().invoke(cli, ["train-tokenizer", *args, f"--output_dir={ours}"])
    assert result.exit_code == 0, result.output
    for name in (
        "metadata.json",
        "processor_config.json",
        "bpe_tokenizer/tokenizer.json",
        "bpe_tokenizer/tokenizer_config.json",
    ):
        assert json.loads((ours / name).read_text()) == json.loads((theirs / name).read_text()), (
            name
        )
    chunks = np.cumsum(np.random.default_rng(2).normal(size=(20, 4, 5)) * 0.3, axis=1)
    np.save(tmp_path / "chunks.npy", chunks.astype(np.float32))
    expected = FASTTokenizer.load(ours).encode(chunks.astype(np.float32))
    assert lerobot(LEROBOT_SCRIPT, "tokens", theirs, tmp_path / "chunks.npy")["tokens"] == expected
