"""VQ-BeT as a user types it, at tiny size: `rlctl train --policy.type=vqbet` on LeRobot's
sim_video fixture through both phases (the action quantiser, then the GPT), fine-tuning from
`--policy.path`, and `rlctl eval` of a PushT-shaped VQ-BeT for a few steps (its plan measured on the
observation history VQ-BeT reads)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.vqbet import VQBeTConfig
from rlctl.entrypoints.cli.main import cli

TINY = {
    "n_obs_steps": 2,
    "n_action_pred_token": 2,
    "action_chunk_size": 3,
    "pretrained_backbone_weights": None,
    "spatial_softmax_num_keypoints": 4,
    "vqvae_n_embed": 8,
    "vqvae_embedding_dim": 16,
    "vqvae_enc_hidden_dim": 16,
    "gpt_block_size": 16,
    "gpt_input_dim": 16,
    "gpt_output_dim": 16,
    "gpt_n_layer": 1,
    "gpt_n_head": 2,
    "gpt_hidden_dim": 16,
}


def as_args(fields: dict) -> list[str]:
    return [f"--policy.{k}={'null' if v is None else v}" for k, v in fields.items()]


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def changed(before: Path, after: Path) -> set[str]:
    old, new = load_file(before / "model.safetensors"), load_file(after / "model.safetensors")
    assert old.keys() == new.keys()
    return {key for key in old if not torch.equal(old[key], new[key])}


@pytest.mark.slow
def test_train_both_phases_then_fine_tune(fixtures_dir: Path, tmp_path: Path) -> None:
    common = [
        f"--dataset.root={fixtures_dir / 'sim_video'}",
        "--batch_size=4",
        "--num_workers=0",
        "--log_freq=1",
        "--save_freq=2",
    ]
    out = tmp_path / "run"
    args = ["train", "--policy.type=vqbet", *as_args(TINY), "--policy.crop_shape=[40,56]"]
    args += ["--policy.n_vqvae_training_steps=2", "--steps=4", f"--output_dir={out}", *common]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output

    steps = metrics(out)
    trained = [s for s in steps if "recon_l1_error" in s or "offset_loss" in s]
    phases = ["vq" if "recon_l1_error" in s else "gpt" for s in trained]
    assert phases == ["vq", "vq", "gpt", "gpt"], steps

    quantised = out / "checkpoints" / "000002" / "pretrained_model"
    last = out / "checkpoints" / "last" / "pretrained_model"
    assert load_file(quantised / "model.safetensors")["vqbet.action_head.vqvae_model.discretized"]
    # The second phase trains the GPT and its heads, never the quantiser it reads codes from.
    moved = changed(quantised, last)
    assert any(k.startswith("vqbet.policy.") for k in moved)
    assert not any(k.startswith("vqbet.action_head.vqvae_model.") for k in moved), moved

    config = json.loads((last / "config.json").read_text())
    assert config["type"] == "vqbet" and "n_action_steps" not in config
    train_config = json.loads((last / "train_config.json").read_text())
    assert train_config["scheduler"] == {
        "type": "vqbet",
        "num_warmup_steps": 500,
        "num_vqvae_training_steps": 2,
        "num_cycles": 0.5,
    }
    pre = json.loads((last / "policy_preprocessor.json").read_text())["steps"]
    assert [s["registry_name"] for s in pre] == [
        "rename_observations_processor",
        "to_batch_processor",
        "device_processor",
        "normalizer_processor",
    ]

    policy = load_policy_folder(last)
    observation = {
        "observation.state": np.zeros((1, 2, 6), np.float32),
        "observation.images.front": np.full((1, 2, 3, 48, 64), 0.5, np.float32),
    }
    chunk = policy.predict_chunk(observation).actions
    assert chunk.shape == (1, 3, 6) and torch.isfinite(chunk).all()

    # Fine-tuning a quantised checkpoint goes on with the GPT (the phase is saved).
    tuned = tmp_path / "tuned"
    result = CliRunner().invoke(
        cli,
        ["train", f"--policy.path={last}", "--steps=2", f"--output_dir={tuned}", *common],
    )
    assert result.exit_code == 0, result.output
    assert all("offset_loss" in s for s in metrics(tuned) if "loss" in s)
    tuned_last = tuned / "checkpoints" / "last" / "pretrained_model"
    assert not any(
        k.startswith("vqbet.action_head.vqvae_model.") for k in changed(last, tuned_last)
    )


@pytest.mark.slow
def test_eval_on_pusht(tmp_path: Path) -> None:
    pytest.importorskip("gym_pusht")
    config = VQBeTConfig(
        input_features={
            "observation.state": typed_feature("STATE", (2,)),
            "observation.image": typed_feature("VISUAL", (3, 96, 96)),
        },
        output_features={"action": typed_feature("ACTION", (2,))},
        device="cpu",
        **TINY,
        crop_shape=(84, 84),
    )
    stats = {
        "observation.state": {"min": np.zeros(2), "max": np.full(2, 512.0)},
        "action": {"min": np.zeros(2), "max": np.full(2, 512.0)},
    }
    policy = create_policy(config, stats)
    policy.model.vqbet.action_head.vqvae_model.discretized.fill_(True)
    folder = policy.save(tmp_path / "vqbet_pusht")
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            f"--policy.path={folder}",
            "--env.type=pusht",
            "--env.episode_length=7",
            "--eval.n_episodes=1",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={out}",
        ],
    )
    assert result.exit_code == 0, result.output
    info = json.loads((out / "eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 1
