"""`dataset push | pull` and `policy push | pull` as typed, against the fake Hub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.timeout(60)


def test_dataset_push_then_pull_some_episodes(fake_hub, hub_env, sim_video_copy):
    runner = CliRunner()

    pushed = runner.invoke(
        cli,
        [
            "dataset",
            "push",
            str(sim_video_copy),
            "--repo-id",
            "alice/sim",
            "--tags",
            "a,b",
            "--json",
        ],
    )

    assert pushed.exit_code == 0, pushed.output
    assert json.loads(pushed.stdout)["version_tag"] == "v3.0"
    pulled = runner.invoke(cli, ["dataset", "pull", "alice/sim", "--episodes", "0-1", "--json"])
    assert pulled.exit_code == 0, pulled.output
    answer = json.loads(pulled.stdout)
    assert answer["episodes"] == [0, 1]
    assert (Path(answer["root"]) / "meta" / "info.json").is_file()


def test_dataset_pull_of_a_missing_repo_is_one_error_and_a_hint(fake_hub, hub_env):
    result = CliRunner().invoke(cli, ["dataset", "pull", "alice/missing"])

    assert result.exit_code == 1
    assert "error: dataset alice/missing@v3.0: no dataset repo 'alice/missing'" in result.output
    assert "hint: " in result.output
    assert "Traceback" not in result.output


def test_policy_push_then_pull(fake_hub, hub_env, fixtures_dir, tmp_path):
    folder = tmp_path / "pretrained_model"
    folder.mkdir()
    for name in ("config.json", "train_config.json"):
        shutil.copy(fixtures_dir / "act_tiny" / name, folder / name)
    (folder / "model.safetensors").write_bytes(b"stand-in weights")
    runner = CliRunner()

    pushed = runner.invoke(cli, ["policy", "push", str(folder), "--repo-id", "alice/act"])
    pulled = runner.invoke(cli, ["policy", "pull", "alice/act", "--json"])

    assert pushed.exit_code == 0, pushed.output
    assert pushed.stdout.startswith("pushed 4 files to ")
    assert pulled.exit_code == 0, pulled.output
    root = Path(json.loads(pulled.stdout)["root"])
    assert (root / "model.safetensors").read_bytes() == b"stand-in weights"
