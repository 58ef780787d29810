"""`rlctl train-tokenizer` as a user types it, on LeRobot's sim_video fixture: the folder it writes
is a FAST tokenizer π0-FAST loads (rlctl's and LeRobot's spellings of the dataset both read),
and a bad setting is one message with a hint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("tokenizers", reason="the FAST tokenizer needs the smolvla extra")

from rlctl.adapters.policies.vla.fast import load_action_tokenizer
from rlctl.entrypoints.cli.main import cli


@pytest.mark.slow
def test_fits_a_tokenizer_on_a_dataset_and_pi0_fast_can_load_it(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "fast"
    result = CliRunner().invoke(
        cli,
        [
            "train-tokenizer",
            f"--dataset.root={fixtures_dir / 'sim_video'}",
            "--action_horizon=4",
            "--encoded_dims=0:6",
            "--sample_fraction=1.0",
            "--vocab_size=400",
            "--normalization_mode=MEAN_STD",
            f"--output_dir={out}",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{") :])
    # 3 episodes of 25 frames: 22 windows of 4 each.
    assert data["chunks"] == data["num_training_chunks"] == 66
    assert data["output_dir"] == str(out) and data["normalization_mode"] == "MEAN_STD"
    assert data["compression_stats"]["compression_ratio"] > 1
    tokenizer = load_action_tokenizer(str(out))
    assert (tokenizer.time_horizon, tokenizer.action_dim) == (4, 6)
    chunk = np.cumsum(np.random.default_rng(0).normal(size=(4, 6)) * 0.2, axis=0)
    decoded = tokenizer.decode(tokenizer.encode(chunk)[0], 4, 6)
    assert np.abs(decoded - chunk).max() < 0.2  # DCT rounding at scale 10

    # LeRobot's spelling of the dataset, and the earlier tokenizer replaced.
    result = CliRunner().invoke(
        cli,
        [
            "train-tokenizer",
            f"--root={fixtures_dir / 'sim_video'}",
            "--repo_id=lerobot/sim_video",
            "--action_horizon=5",
            "--encoded_dims=0:3",
            f"--output_dir={out}",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "saved to" in result.output and "--policy.action_tokenizer_name=" in result.output
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["repo_id"] == "lerobot/sim_video" and metadata["action_horizon"] == 5
    assert metadata["normalization_mode"] == "QUANTILES"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no dataset to fit the tokenizer on"),
        (["--encoded_dims=0:6,7:23"], "beyond the dataset's 6 action dimensions"),
        (["--encoded_dims=0:6", "--action_horizon=100"], "no episode has 100 frames"),
    ],
)
def test_bad_settings_are_one_message_with_a_hint(
    args: list[str], message: str, fixtures_dir: Path, tmp_path: Path
) -> None:
    dataset = [] if not args else [f"--dataset.root={fixtures_dir / 'sim_video'}"]
    result = CliRunner().invoke(
        cli, ["train-tokenizer", *dataset, *args, f"--output_dir={tmp_path / 'out'}"]
    )
    assert result.exit_code == 1, result.output
    assert message in result.output and "hint:" in result.output
    assert not (tmp_path / "out").exists()


def test_help_lists_lerobots_settings() -> None:
    result = CliRunner().invoke(cli, ["train-tokenizer", "--help"])
    assert result.exit_code == 0
    for setting in ("--action_horizon", "--encoded_dims", "--normalization_mode", "--push_to_hub"):
        assert setting in result.output
