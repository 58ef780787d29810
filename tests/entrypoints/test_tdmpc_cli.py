"""TD-MPC as a user types it, at tiny size: `rlctl train --policy.type=tdmpc` offline on a small
dataset with rewards (written here: a square camera, a state, next.reward), the target network
following the model, fine-tuning from `--policy.path`, a dataset without rewards refused in one
line, and `rlctl eval` of the trained planner on PushT for a few steps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.features import FeatureSpec
from rlctl.entrypoints.cli.main import cli

TINY = [
    "--policy.horizon=3",
    "--policy.latent_dim=8",
    "--policy.mlp_dim=16",
    "--policy.state_encoder_hidden_dim=16",
    "--policy.image_encoder_hidden_dim=4",
    "--policy.n_gaussian_samples=8",
    "--policy.n_pi_samples=2",
    "--policy.n_elites=3",
    "--policy.cem_iterations=1",
]
HWC = ["height", "width", "channels"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write_dataset(root: Path, *, reward: bool = True) -> Path:
    """Two short PushT-shaped episodes: a 96x96 camera, a 2-D state and action, rewards."""
    features = {
        "observation.image": FeatureSpec("observation.image", "image", (96, 96, 3), names=HWC),
        "observation.state": FeatureSpec("observation.state", "float32", (2,)),
        "action": FeatureSpec("action", "float32", (2,)),
        "next.reward": FeatureSpec("next.reward", "float32", (1,)),
    }
    if not reward:
        del features["next.reward"]
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    rng = np.random.default_rng(0)
    with LeRobotV3Writer(options=options).create(root, fps=10, features=features) as session:
        for length in (9, 7):
            for _ in range(length):
                frame = {
                    "observation.image": rng.integers(0, 255, (96, 96, 3), dtype=np.uint8),
                    "observation.state": rng.uniform(0, 512, 2).astype(np.float32),
                    "action": rng.uniform(0, 512, 2).astype(np.float32),
                    "next.reward": np.float32(rng.random()),
                    "task": "push the T",
                }
                if not reward:
                    del frame["next.reward"]
                session.add_frame(frame)
            session.save_episode()
    return root


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_train_offline_fine_tune_and_eval(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "pusht_like")
    common = [
        f"--dataset.root={dataset}",
        "--batch_size=4",
        "--num_workers=0",
        "--log_freq=1",
        "--save_freq=3",
        "--steps=3",
    ]
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli, ["train", "--policy.type=tdmpc", *TINY, f"--output_dir={out}", *common]
    )
    assert result.exit_code == 0, result.output
    trained = [s for s in metrics(out) if "consistency_loss" in s]
    assert len(trained) == 3
    assert all(np.isfinite(s[k]) for s in trained for k in ("reward_loss", "pi_loss"))

    last = out / "checkpoints" / "last" / "pretrained_model"
    weights = load_file(last / "model.safetensors")
    # The target network moved by EMA steps: neither the initial copy nor the model.
    key = "model._pi.0.weight"
    assert not torch.equal(weights[key], weights["model_target._pi.0.weight"])
    config = json.loads((last / "config.json").read_text())
    assert config["type"] == "tdmpc" and config["horizon"] == 3
    train_config = json.loads((last / "train_config.json").read_text())
    assert train_config["optimizer"]["type"] == "adam" and train_config["optimizer"]["lr"] == 3e-4
    assert train_config["scheduler"] is None

    tuned = tmp_path / "tuned"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--policy.path={last}",
            "--policy.use_mpc=false",
            f"--output_dir={tuned}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    tuned_config = json.loads(
        (tuned / "checkpoints" / "last" / "pretrained_model" / "config.json").read_text()
    )
    assert tuned_config["use_mpc"] is False

    pytest.importorskip("gym_pusht")
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            f"--policy.path={last}",
            "--env.type=pusht",
            "--env.obs_type=pixels_agent_pos",
            "--env.episode_length=6",
            "--eval.n_episodes=1",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={tmp_path / 'eval'}",
        ],
    )
    assert result.exit_code == 0, result.output
    info = json.loads((tmp_path / "eval" / "eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 1


@pytest.mark.slow
def test_a_dataset_without_rewards_is_one_line(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "no_rewards", reward=False)
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--policy.type=tdmpc",
            *TINY,
            f"--dataset.root={dataset}",
            "--steps=1",
            f"--output_dir={tmp_path / 'run'}",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "learns from rewards, and the dataset has no 'next.reward' feature" in result.output


def test_a_camera_it_cannot_shift_is_one_line(fixtures_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--policy.type=tdmpc",
            f"--dataset.root={fixtures_dir / 'sim_video'}",
            "--steps=1",
            f"--output_dir={tmp_path / 'run'}",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "needs square images; observation.images.front is [3, 48, 64]" in result.output
