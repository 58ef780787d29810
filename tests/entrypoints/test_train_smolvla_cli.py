"""`rlctl train --policy.type=smolvla` as a user types it, on LeRobot's sim_video fixture and a
tiny SmolVLM folder made offline; then fine-tuning from the checkpoint with LeRobot's freezing
options (`--policy.path=... --policy.train_expert_only=... --policy.freeze_vision_encoder=...`)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

pytest.importorskip("transformers", reason="SmolVLA needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.entrypoints.cli.main import cli

TINY_SMOLVLM = Path(__file__).parents[1] / "adapters" / "policies" / "tiny_smolvlm.py"
VLM = "model.vlm_with_expert.vlm."
VISION = "model.vlm_with_expert.vlm.model.vision_model."
EXPERT = "model.vlm_with_expert.lm_expert."


def changed(before: Path, after: Path) -> set[str]:
    """The parameters that differ between two checkpoints' model.safetensors."""
    from safetensors.torch import load_file

    old, new = load_file(before / "model.safetensors"), load_file(after / "model.safetensors")
    assert old.keys() == new.keys()
    return {key for key in old if not torch.equal(old[key], new[key])}


@pytest.mark.slow
def test_train_then_fine_tune_smolvla_from_the_command_line(fixtures_dir, tmp_path):
    vlm = runpy.run_path(str(TINY_SMOLVLM))["write_tiny_smolvlm"](tmp_path / "vlm")
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
            "--policy.type=smolvla",
            f"--policy.vlm_model_name={vlm}",
            # The VLM's text layers learn too (LeRobot's default trains the expert only).
            "--policy.train_expert_only=false",
            "--policy.num_vlm_layers=2",
            "--policy.chunk_size=4",
            "--policy.n_action_steps=4",
            "--policy.num_steps=2",
            "--policy.resize_imgs_with_padding=[64,64]",
            f"--output_dir={out}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    steps = json.loads((checkpoint / "policy_preprocessor.json").read_text())["steps"]
    tokenizer = next(s for s in steps if s["registry_name"] == "tokenizer_processor")
    assert tokenizer["config"]["tokenizer_name"] == str(vlm)
    # LeRobot's preset: AdamW and the cosine decay with warm-up, written as LeRobot reads it.
    train_config = json.loads((checkpoint / "train_config.json").read_text())
    assert train_config["optimizer"]["type"] == "adamw"
    assert train_config["optimizer"]["betas"] == [0.9, 0.95]
    assert train_config["scheduler"] == {
        "type": "cosine_decay_with_warmup",
        "num_warmup_steps": 1_000,
        "num_decay_steps": 30_000,
        "peak_lr": 1e-4,
        "decay_lr": 2.5e-6,
    }

    policy = load_policy_folder(checkpoint)
    observation = {
        "observation.state": np.zeros((1, 6), np.float32),
        "observation.images.front": np.full((1, 3, 48, 64), 0.5, np.float32),
        "task": "push the t to the target",
    }
    assert policy.predict_chunk(observation).actions.shape == (1, 4, 6)

    # Fine-tune it as LeRobot users do: its config, the freezing options on top.
    tuned = tmp_path / "tuned"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--policy.path={checkpoint}",
            "--policy.train_expert_only=true",
            "--policy.freeze_vision_encoder=false",
            f"--output_dir={tuned}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    tuned_model = tuned / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((tuned_model / "config.json").read_text())
    assert config["type"] == "smolvla" and config["num_vlm_layers"] == 2
    assert config["train_expert_only"] is True and config["freeze_vision_encoder"] is False
    assert config["pretrained_path"] == str(checkpoint)
    moved = changed(checkpoint, tuned_model)
    assert not {key for key in moved if key.startswith(VLM)}  # the whole VLM stays frozen
    assert {key for key in moved if key.startswith(EXPERT)}  # the expert learns

    # The checkpoint's train_expert_only=false is kept; the vision encoder now learns too.
    unfrozen = tmp_path / "unfrozen"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--policy.path={checkpoint}",
            "--policy.freeze_vision_encoder=false",
            f"--output_dir={unfrozen}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    unfrozen_model = unfrozen / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((unfrozen_model / "config.json").read_text())
    assert config["train_expert_only"] is False and config["freeze_vision_encoder"] is False
    moved = changed(checkpoint, unfrozen_model)
    assert {key for key in moved if key.startswith(VISION)}
    assert {key for key in moved if key.startswith(VLM) and not key.startswith(VISION)}

    # Resuming the fine-tuned run keeps its settings.
    result = CliRunner().invoke(cli, ["train", f"--resume={tuned}", "--steps=3", "--save_freq=1"])
    assert result.exit_code == 0, result.output
    assert "trained steps 2..3 of 3" in result.output
    config = json.loads((tuned_model / "config.json").read_text())
    assert config["train_expert_only"] is True and config["freeze_vision_encoder"] is False
