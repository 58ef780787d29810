"""`rlctl calibrate --teleop.type=unitree_g1` as a user types it, with the G1 exoskeleton's two
arm boards printing their lines on ptys: saved calibrations (LeRobot's files) are reused, a
missing one is calibrated by the guided steps on the console, and bad settings are one message."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rlctl.adapters.teleop.virtual_unitree_g1_exo import (
    VirtualExoArm,
    true_calibration,
)
from rlctl.entrypoints.cli.main import cli


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


@pytest.fixture
def boards(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    with VirtualExoArm("left") as left, VirtualExoArm("right", seed=5) as right:
        yield left, right


def args(left: VirtualExoArm, right: VirtualExoArm) -> list[str]:
    return [
        "--teleop.type=unitree_g1",
        "--teleop.id=exo",
        f"--teleop.left_arm_config.port={left.port}",
        f"--teleop.right_arm_config.port={right.port}",
    ]


def test_calibrate_reuses_lerobots_files_of_both_arms(boards, tmp_path):
    left, right = boards
    folder = tmp_path / "calibration/teleoperators/unitree_g1"
    folder.mkdir(parents=True)
    for arm in boards:
        (folder / f"exo_{arm.side}.json").write_text(true_calibration(arm).to_json())
    result = invoke("calibrate", *args(left, right), "--reuse=yes")
    assert result.exit_code == 0, result.output
    assert "left arm: using the saved calibration" in result.output
    assert "right arm: using the saved calibration" in result.output


def test_a_port_on_one_arm_only_is_one_message(boards):
    left, _ = boards
    result = CliRunner().invoke(
        cli,
        ["calibrate", "--teleop.type=unitree_g1", f"--teleop.left_arm_config.port={left.port}"],
    )
    assert result.exit_code != 0
    assert "only the left exoskeleton arm has a port" in result.output
    assert "Traceback" not in result.output


def test_teleoperating_the_g1_without_a_locomotion_controller_is_one_message(boards):
    result = CliRunner().invoke(
        cli,
        [
            "teleoperate",
            "--robot.type=unitree_g1",
            "--robot.is_simulation=false",
            *args(*boards),
            "--display_data=false",
        ],
    )
    assert result.exit_code != 0
    assert "only while a locomotion controller drives its legs" in result.output, result.output
    assert "Traceback" not in result.output
