"""The README's main command, tiny: record, train and evaluate in one go, as a user types it."""

import json

import pytest
from click.testing import CliRunner

from rlctl.entrypoints.cli.main import cli


@pytest.mark.slow
def test_quickstart_runs_the_whole_loop(tmp_path):
    out = tmp_path / "qs"
    result = CliRunner().invoke(
        cli,
        [
            "quickstart",
            "--task",
            "reach-v3",
            "--episodes",
            "2",
            "--steps",
            "20",
            "--batch_size",
            "16",
            "--eval_episodes",
            "2",
            "--output_dir",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "success rate" in result.output
    info = json.loads((out / "eval/reach-v3/eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 2
    checkpoint = out / "train/reach-v3_mlp/checkpoints/last/pretrained_model"
    assert (checkpoint / "model.safetensors").is_file()
    meta = json.loads((out / "data/reach-v3/meta/info.json").read_text())
    assert meta["total_episodes"] == 2 and meta["codebase_version"] == "v3.0"


def test_a_second_run_into_the_same_folder_says_what_to_do(tmp_path):
    (tmp_path / "qs/data/reach-v3/meta").mkdir(parents=True)
    (tmp_path / "qs/data/reach-v3/meta/info.json").write_text("{}")
    result = CliRunner().invoke(
        cli, ["quickstart", "--task", "reach-v3", "--output-dir", str(tmp_path / "qs")]
    )
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output
