"""The CLI as a user types it (click's runner), on the dataset LeRobot wrote."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rlctl.entrypoints.cli.main import cli


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def sim_video(fixtures_dir):
    return str(fixtures_dir / "sim_video")


def test_help_lists_commands(runner):
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "dataset" in result.output and "--log-format" in result.output


def test_python_dash_m_rlctl_is_the_command_as_torchrun_launches_it():
    """`torchrun --nproc-per-node=N -m rlctl train ...` runs `python -m rlctl train ...`."""
    result = subprocess.run(
        [sys.executable, "-m", "rlctl", "train", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: rlctl train")


def test_version(runner):
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("rlctl ")


def test_dataset_info_human(runner, sim_video):
    result = runner.invoke(cli, ["dataset", "info", sim_video])
    assert result.exit_code == 0, result.output
    out = result.output
    for expected in (
        "fps       10",
        "episodes  3",
        "frames    75",
        "so101_follower",
        "pick the cube",
        "place the cube",
        "observation.images.front",
        "av1",
    ):
        assert expected in out


def test_dataset_info_json(runner, sim_video):
    result = runner.invoke(cli, ["dataset", "info", sim_video, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["fps"] == 10 and data["total_episodes"] == 3 and data["total_frames"] == 75
    assert data["tasks"] == ["pick the cube", "place the cube"]
    assert data["robot_type"] == "so101_follower"
    assert data["features"]["observation.state"]["shape"] == [6]
    assert data["size_bytes"] > 0


def test_missing_dataset_is_one_line_and_a_hint(runner, tmp_path):
    result = runner.invoke(cli, ["dataset", "info", str(tmp_path / "nope")])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line]
    assert lines[0].startswith("error: ") and "nope" in lines[0]
    assert any(line.startswith("hint: ") for line in lines)
    assert "Traceback" not in result.output


def test_debug_shows_the_traceback(runner, tmp_path):
    result = runner.invoke(cli, ["--debug", "dataset", "info", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert result.exception is not None and not isinstance(result.exception, SystemExit)


def test_usage_error_exits_2(runner):
    assert runner.invoke(cli, ["dataset", "info"]).exit_code == 2
    assert runner.invoke(cli, ["no-such-command"]).exit_code == 2


def test_print_config_shows_overrides(runner, sim_video):
    result = runner.invoke(
        cli, ["dataset", "info", sim_video, "--dataset.video_backend=pyav", "--print-config"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["dataset"]["video_backend"] == "pyav"


def test_bad_override_names_the_key(runner, sim_video):
    result = runner.invoke(cli, ["dataset", "info", sim_video, "--dataset.video_backnd=pyav"])
    assert result.exit_code == 1
    assert "video_backnd" in result.output


def test_config_file_then_environment_then_flags(runner, sim_video, tmp_path, monkeypatch):
    config = tmp_path / "settings.yaml"
    config.write_text("dataset:\n  video_backend: torchcodec\nprogress: silent\n")
    args = ["dataset", "info", sim_video, "--config", str(config), "--print-config"]
    data = json.loads(runner.invoke(cli, args).output)
    assert data["dataset"]["video_backend"] == "torchcodec" and data["progress"] == "silent"
    monkeypatch.setenv("RLCTL_DATASET__VIDEO_BACKEND", "pyav")
    assert json.loads(runner.invoke(cli, args).output)["dataset"]["video_backend"] == "pyav"
    data = json.loads(runner.invoke(cli, [*args, "--dataset.video_backend=auto"]).output)
    assert data["dataset"]["video_backend"] == "auto"


def test_malformed_config_file_names_the_file(runner, sim_video, tmp_path):
    config = tmp_path / "broken.yaml"
    config.write_text("dataset: [unclosed\n")
    result = runner.invoke(cli, ["dataset", "info", sim_video, "--config", str(config)])
    assert result.exit_code == 1 and "broken.yaml" in result.output


def test_json_logs(runner, tmp_path):
    result = runner.invoke(
        cli, ["--log-format", "json", "--log-level", "debug", "dataset", "info", str(tmp_path)]
    )
    assert result.exit_code == 1
