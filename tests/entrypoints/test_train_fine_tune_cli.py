"""Fine-tuning LeRobot's own ACT checkpoint with `rlctl train --policy.path=... --policy.<field>`
as a user types it, then resuming the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from rlctl.entrypoints.cli.main import cli


@pytest.mark.slow
def test_fine_tune_lerobots_act_with_fewer_action_steps_then_resume(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    pretrained, out = fixtures_dir / "act_tiny", tmp_path / "tuned"
    common = ["--steps=2", "--batch_size=2", "--num_workers=0", "--log_freq=1"]
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--dataset.root={fixtures_dir / 'sim_video'}",
            f"--policy.path={pretrained}",
            "--policy.n_action_steps=3",
            "--save_freq=2",
            f"--output_dir={out}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    saved = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((saved / "config.json").read_text())
    assert config["type"] == "act" and config["n_action_steps"] == 3
    assert config["chunk_size"] == 5 and config["dim_model"] == 32  # the checkpoint's
    assert config["pretrained_path"] == str(pretrained)

    # Training started from LeRobot's weights: two steps at ACT's 1e-5 move them a little.
    before, after = (
        load_file(pretrained / "model.safetensors"),
        load_file(saved / "model.safetensors"),
    )
    assert before.keys() == after.keys()
    moved = max((after[k].float() - before[k].float()).abs().max().item() for k in before)
    assert 0 < moved < 1e-3
    assert any(not torch.equal(before[k], after[k]) for k in before)

    result = CliRunner().invoke(cli, ["train", f"--resume={out}", "--steps=3", "--save_freq=1"])
    assert result.exit_code == 0, result.output
    assert "trained steps 2..3 of 3" in result.output
    resumed = json.loads(
        (out / "checkpoints" / "last" / "pretrained_model" / "config.json").read_text()
    )
    assert resumed["n_action_steps"] == 3 and resumed["pretrained_path"] == str(pretrained)
