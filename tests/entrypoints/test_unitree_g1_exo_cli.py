"""`rlctl calibrate --teleop.type=unitree_g1` as a user types it, with the G1 exoskeleton's two
arm boards printing their lines on ptys: saved calibrations (LeRobot's files) are reused, a
missing one is calibrated by the guided steps on the console, and bad settings are one message."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rlctl.adapters.teleop.virtual_unitree_g1_exo import (
    VirtualExoArm,
    true_calibration,
    write_assets,
)
from rlctl.entrypoints.cli.main import cli

from ..adapters.robots.g1_bridge import EmulatedBridge
from ..adapters.robots.g1_policies import HOLOSOMA_KP, write_policies


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
        ["teleoperate", "--robot.type=unitree_g1", "--robot.is_simulation=false", *args(*boards)],
    )
    assert result.exit_code != 0
    assert "only while a locomotion controller drives its legs" in result.output, result.output
    assert "--robot.controller=GrootLocomotionController" in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_record_the_exoskeleton_driving_the_g1_beside_its_locomotion_controller(boards, tmp_path):
    pytest.importorskip("pinocchio", reason="the exoskeleton's IK needs the unitree_g1 extra")
    pytest.importorskip("onnxruntime", reason="the controller needs the unitree_g1 extra")
    pytest.importorskip("onnx", reason="the controller needs the unitree_g1 extra")
    left, right = boards
    folder = tmp_path / "calibration/teleoperators/unitree_g1"
    folder.mkdir(parents=True)
    for arm in boards:
        (folder / f"exo_{arm.side}.json").write_text(true_calibration(arm).to_json())
    assets = write_assets(tmp_path / "g1")
    policies = tmp_path / "policies"
    policies.mkdir()
    write_policies(policies)
    left.set_angles(elbow_flex=0.5)
    root = tmp_path / "g1_exo"
    with EmulatedBridge() as bridge:
        result = invoke(
            "record",
            "--robot.type=unitree_g1",
            "--robot.is_simulation=false",
            "--robot.robot_ip=127.0.0.1",
            f"--robot.lowcmd_port={bridge.lowcmd_port}",
            f"--robot.lowstate_port={bridge.lowstate_port}",
            "--robot.controller=HolosomaLocomotionController",
            f"--robot.controller_repo={policies}",
            *args(left, right),
            f"--teleop.assets={assets}",
            f"--dataset.root={root}",
            "--dataset.single_task=wave",
            "--dataset.num_episodes=1",
            "--dataset.fps=10",
            "--dataset.episode_time_s=1",
            "--dataset.reset_time_s=0",
            "--controls=off",
            "--progress=silent",
        )
        assert result.exit_code == 0, result.output
        commands = [c["data"]["motor_cmd"] for c in bridge.commands]
    info = json.loads((root / "meta/info.json").read_text())
    names = info["features"]["action"]["names"]
    assert names[0] == "kLeftShoulderPitch.q" and names[-4:] == [
        "remote.lx", "remote.ly", "remote.rx", "remote.ry",
    ]  # fmt: skip
    assert info["total_frames"] == 10
    # The left elbow followed the exoskeleton; the legs got the controller's gains.
    assert max(abs(c[18]["q"]) for c in commands) > 0.05
    assert any(c[0]["kp"] == HOLOSOMA_KP[0] for c in commands)
