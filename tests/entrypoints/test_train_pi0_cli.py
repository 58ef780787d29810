"""`rlctl train --policy.type=pi0|pi05` as a user types it, on LeRobot's sim_video fixture at
tiny Gemma sizes (PaliGemma's tokenizer read from a tiny local folder), then fine-tuning from the
checkpoint with the action expert alone learning (--policy.path --policy.train_expert_only)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

pytest.importorskip("transformers", reason="π0 needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.entrypoints.cli.main import cli

TINY_TOKENIZER = Path(__file__).parents[1] / "adapters" / "policies" / "tiny_paligemma_tokenizer.py"
VLM = (
    "custom:width=32,depth=1,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)
PALIGEMMA = "model.paligemma_with_expert.paligemma."
GEMMA_EXPERT = "model.paligemma_with_expert.gemma_expert."
EXPERT = "custom:width=16,depth=1,mlp_dim=32,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320"


@pytest.fixture
def tiny_paligemma_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PaliGemma's tokenizer name read from a tiny local folder, as if from the Hub cache."""
    from rlctl.adapters.policies.vla import tokenizer

    folder: Path = runpy.run_path(str(TINY_TOKENIZER))["write_tiny_paligemma_tokenizer"](
        tmp_path / "tokenizer"
    )
    load = tokenizer.load_tokenizer

    def local(name: str) -> object:
        return load(str(folder) if name == tokenizer.PALIGEMMA_TOKENIZER else name)

    monkeypatch.setattr(tokenizer, "load_tokenizer", local)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pi0", "pi05"])
def test_train_then_fine_tune_pi0_from_the_command_line(
    kind: str, fixtures_dir: Path, tiny_paligemma_tokenizer: Path, tmp_path: Path
) -> None:
    common = [
        f"--dataset.root={fixtures_dir / 'sim_video'}",
        "--steps=2",
        "--batch_size=2",
        "--num_workers=0",
        "--log_freq=1",
        "--save_freq=2",
    ]
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--policy.type={kind}",
            f"--policy.paligemma_variant={VLM}",
            f"--policy.action_expert_variant={EXPERT}",
            "--policy.chunk_size=4",
            "--policy.n_action_steps=4",
            "--policy.num_inference_steps=2",
            "--policy.image_resolution=[28,28]",
            "--policy.tokenizer_max_length=24",
            f"--output_dir={out}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["type"] == kind and config["paligemma_variant"] == VLM
    steps = json.loads((checkpoint / "policy_preprocessor.json").read_text())["steps"]
    tokenizer = next(s for s in steps if s["registry_name"] == "tokenizer_processor")
    assert tokenizer["config"]["tokenizer_name"] == "google/paligemma-3b-pt-224"
    train_config = json.loads((checkpoint / "train_config.json").read_text())
    assert train_config["optimizer"]["type"] == "adamw"

    policy = load_policy_folder(checkpoint)
    observation = {
        "observation.state": np.zeros((1, 6), np.float32),
        "observation.images.front": np.full((1, 3, 48, 64), 0.5, np.float32),
        "task": "push the t to the target",
    }
    assert policy.predict_chunk(observation).actions.shape == (1, 4, 6)

    # Fine-tune it with the PaliGemma frozen (π0's default trains everything).
    tuned = tmp_path / "tuned"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--policy.path={checkpoint}",
            "--policy.train_expert_only=true",
            f"--output_dir={tuned}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    tuned_model = tuned / "checkpoints" / "last" / "pretrained_model"
    tuned_config = json.loads((tuned_model / "config.json").read_text())
    assert tuned_config["paligemma_variant"] == VLM and tuned_config["chunk_size"] == 4
    assert tuned_config["train_expert_only"] is True and not config["train_expert_only"]
    assert tuned_config["pretrained_path"] == str(checkpoint)
    before = load_file(checkpoint / "model.safetensors")
    after = load_file(tuned_model / "model.safetensors")
    moved = {key for key in before if not torch.equal(before[key], after[key])}
    assert not {key for key in moved if key.startswith(PALIGEMMA)}
    assert {key for key in moved if key.startswith(GEMMA_EXPERT)}
