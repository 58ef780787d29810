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


TINY = ["--task", "reach-v3", "--episodes", "1", "--steps", "2", "--batch_size", "2"]


@pytest.mark.slow
def test_a_second_run_works_and_leaves_the_first_one_alone(tmp_path):
    out = tmp_path / "qs"
    args = ["quickstart", *TINY, "--eval_episodes", "1", "--output_dir", str(out)]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0, second.output
    assert f"{out} already holds an earlier run" in second.output
    assert f"this run goes to {tmp_path / 'qs-2'}" in second.output
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before
    info = json.loads((tmp_path / "qs-2/eval/reach-v3/eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 1


@pytest.mark.slow
def test_a_run_into_a_used_folder_starts_in_a_new_one(tmp_path):
    """Whatever the folder holds stays; the new run's first step already writes elsewhere."""
    (tmp_path / "qs/data/reach-v3/meta").mkdir(parents=True)
    (tmp_path / "qs/data/reach-v3/meta/info.json").write_text("{}")
    result = CliRunner().invoke(
        cli,
        ["quickstart", *TINY, "--task", "no-such-task-v3", "--output-dir", str(tmp_path / "qs")],
    )
    assert "this run goes to" in result.output and str(tmp_path / "qs-2") in result.output
    assert (tmp_path / "qs/data/reach-v3/meta/info.json").read_text() == "{}"
    assert result.exit_code == 1  # the unknown task, said in one line
    assert "unknown Meta-World task" in result.output and "Traceback" not in result.output
