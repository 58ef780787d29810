"""`rlctl train --policy.type=groot` as a user types it, on LeRobot's sim_video fixture with a tiny
GR00T N1.7 base model (tiny_groot.py: its architecture and Qwen3-VL backbone folder, no weights,
so training starts from random ones), then fine-tuning from the checkpoint with the DiT frozen
(--policy.path --policy.tune_diffusion_model=false)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.entrypoints.cli.main import cli

TINY_GROOT = Path(__file__).parents[1] / "adapters" / "policies" / "tiny_groot.py"
HEAD = "_groot_model.action_head."
DIT = "_groot_model.action_head.model."
BACKBONE = "_groot_model.backbone."


@pytest.mark.slow
def test_train_then_fine_tune_groot_from_the_command_line(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    tiny: Path = runpy.run_path(str(TINY_GROOT))["write_tiny_groot"](tmp_path / "tiny")
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
            "--policy.type=groot",
            f"--policy.base_model_path={tiny / 'base'}",
            "--policy.chunk_size=8",
            "--policy.n_action_steps=8",
            "--policy.max_state_dim=16",
            "--policy.max_action_dim=16",
            "--policy.use_bf16=false",
            f"--output_dir={out}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["type"] == "groot" and config["base_model_path"] == str(tiny / "base")
    steps = json.loads((checkpoint / "policy_preprocessor.json").read_text())["steps"]
    assert [s["registry_name"] for s in steps][2:4] == [
        "groot_n1_7_pack_inputs_v1",
        "groot_n1_7_vlm_encode_v1",
    ]
    train_config = json.loads((checkpoint / "train_config.json").read_text())
    assert train_config["optimizer"]["type"] == "adamw"
    assert train_config["optimizer"]["grad_clip_norm"] == 1.0

    policy = load_policy_folder(checkpoint)
    observation = {
        "observation.state": np.zeros((1, 6), np.float32),
        "observation.images.front": np.full((1, 3, 48, 64), 0.5, np.float32),
        "task": "push the t to the target",
    }
    assert policy.predict_chunk(observation).actions.shape == (1, 8, 6)

    # Fine-tune it with the DiT frozen: the projectors and the VL layers learn, the backbone
    # (frozen by default) and the DiT do not.
    tuned = tmp_path / "tuned"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--policy.path={checkpoint}",
            "--policy.tune_diffusion_model=false",
            f"--output_dir={tuned}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    tuned_model = tuned / "checkpoints" / "last" / "pretrained_model"
    tuned_config = json.loads((tuned_model / "config.json").read_text())
    assert tuned_config["tune_diffusion_model"] is False and tuned_config["chunk_size"] == 8
    assert tuned_config["pretrained_path"] == str(checkpoint)
    before = load_file(checkpoint / "model.safetensors")
    after = load_file(tuned_model / "model.safetensors")
    moved = {key for key in before if not torch.equal(before[key], after[key])}
    assert not {key for key in moved if key.startswith((DIT, BACKBONE))}
    assert {key for key in moved if key.startswith(HEAD)}
