"""`rlctl calibrate | record` on an OpenArm as a user types them, its Damiao motors emulated on
python-can's virtual interface; a motor that stops answering mid-episode leaves the finished
episodes whole and the error names the motor and the bus."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.motors.virtual_damiao import VirtualDamiaoMotors
from rlctl.adapters.robots.config import OpenArmFollowerConfig
from rlctl.adapters.robots.openarm_follower import OpenArmFollower
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.timeout(60)

QUIET = ["--controls=off", "--progress=silent"]
JOINTS = [f"joint_{i}" for i in range(1, 8)] + ["gripper"]
_channels = itertools.count()


@pytest.fixture
def arm(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    config = OpenArmFollowerConfig(port="x")
    motors = {send: (recv, model) for send, recv, model in config.motor_config.values()}
    with VirtualDamiaoMotors(f"openarm-cli-{next(_channels)}", motors) as emulated:
        yield emulated


def robot_args(emulated) -> list[str]:
    return [
        "--robot.type=openarm_follower",
        f"--robot.port={emulated.channel}",
        "--robot.can_interface=virtual",
        "--robot.can_timeout_s=0.2",
        "--robot.can_retries=1",
        "--robot.side=right",
        "--robot.id=lab",
    ]


def record_args(emulated, root, episodes: int) -> list[str]:
    return [
        "record",
        *robot_args(emulated),
        "--teleop.type=scripted",
        f"--teleop.joints=[{','.join(JOINTS)}]",
        "--teleop.amplitude=4",
        f"--dataset.root={root}",
        "--dataset.single_task=wave",
        f"--dataset.num_episodes={episodes}",
        "--dataset.fps=15",
        "--dataset.episode_time_s=0.6",
        "--dataset.reset_time_s=0",
        *QUIET,
    ]


def calibrate(emulated, tmp_path):
    result = CliRunner().invoke(cli, ["calibrate", *robot_args(emulated)], input="\n")
    assert result.exit_code == 0, result.output
    return tmp_path / "calibration/robots/openarm_follower/lab.json"


@pytest.mark.slow
def test_calibrate_then_record_an_openarm(arm, tmp_path):
    saved = calibrate(arm, tmp_path)
    assert json.loads(saved.read_text())["gripper"]["range_min"] == -90

    root = tmp_path / "wave"
    result = CliRunner().invoke(cli, record_args(arm, root, episodes=2))
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.robot_type == "openarm_follower" and reader.meta.total_episodes == 2
    assert reader.meta.features["action"].names == [f"{j}.pos" for j in JOINTS]
    actions = np.stack([reader[i]["action"].numpy() for i in range(len(reader))])
    # The right arm's joint_4 is limited to 0..135: the guard clipped the script's small dips.
    assert actions[:, 3].min() == 0.0 and actions[:, 4].min() < -1.0
    assert not any(m.enabled for m in arm.motors.values())


@pytest.mark.slow
def test_a_motor_stopping_mid_episode_keeps_the_finished_episodes(arm, tmp_path, monkeypatch):
    calibrate(arm, tmp_path)
    ticks = {"resets": 0, "reads": 0}
    original_reset = OpenArmFollower.reset
    original_read = OpenArmFollower.get_observation

    def reset(self):
        ticks["resets"] += 1
        ticks["reads"] = 0
        original_reset(self)

    def get_observation(self):
        ticks["reads"] += 1
        if ticks["resets"] == 2 and ticks["reads"] == 4:
            arm.silence(3)
        return original_read(self)

    monkeypatch.setattr(OpenArmFollower, "reset", reset)
    monkeypatch.setattr(OpenArmFollower, "get_observation", get_observation)
    root = tmp_path / "broken"
    result = CliRunner().invoke(cli, record_args(arm, root, episodes=3))
    assert result.exit_code == 1, result.output
    assert f"CAN bus {arm.channel}" in result.output
    assert "motor 'joint_3' (CAN id 0x03, answers on 0x13) did not answer" in result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 1 and len(reader) == 9
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output


@pytest.mark.slow
def test_an_openarm_leader_drives_the_follower(arm, tmp_path):
    config = OpenArmFollowerConfig(port="x")
    motors = {send: (recv, model) for send, recv, model in config.motor_config.values()}
    leader_args = [
        "--teleop.type=openarm_leader",
        "--teleop.can_interface=virtual",
        "--teleop.can_timeout_s=0.2",
        "--teleop.id=hand",
    ]
    with VirtualDamiaoMotors(f"openarm-leader-{next(_channels)}", motors) as leader:
        leader_args.append(f"--teleop.port={leader.channel}")
        result = CliRunner().invoke(cli, ["calibrate", *leader_args], input="\n")
        assert result.exit_code == 0, result.output
        saved = tmp_path / "calibration/teleoperators/openarm_leader/hand.json"
        assert json.loads(saved.read_text())["joint_1"]["range_max"] == 90
        calibrate(arm, tmp_path)
        assert not any(m.enabled for m in leader.motors.values())  # free to move by hand

        original = leader._answer

        def hand(arbitration_id, data):  # the leader's joint_5 is held at 30 degrees
            leader.motors[5].position = 30.0
            return original(arbitration_id, data)

        leader._answer = hand
        result = CliRunner().invoke(
            cli,
            [
                "teleoperate",
                *robot_args(arm),
                *leader_args,
                "--fps=30",
                "--teleop_time_s=0.3",
                *QUIET,
            ],
        )
        assert result.exit_code == 0, result.output
        assert arm.motors[5].position == pytest.approx(30.0, abs=0.05)
        assert arm.motors[1].position == pytest.approx(0.0, abs=0.05)


@pytest.mark.slow
def test_a_bimanual_openarm_pair_calibrates_arm_by_arm_and_records(arm, tmp_path):
    config = OpenArmFollowerConfig(port="x")
    motors = {send: (recv, model) for send, recv, model in config.motor_config.values()}
    channels = [f"openarm-bi-{next(_channels)}" for _ in range(3)]
    emulated = [VirtualDamiaoMotors(channel, motors).start() for channel in channels]
    try:
        right, left_leader, right_leader = emulated
        robot = ["--robot.type=bi_openarm_follower"]
        teleop = ["--teleop.type=bi_openarm_leader", "--teleop.id=hands"]
        for side, bus in (("left", arm), ("right", right)):
            robot += [
                f"--robot.{side}_arm_config.port={bus.channel}",
                f"--robot.{side}_arm_config.side={side}",
                f"--robot.{side}_arm_config.can_interface=virtual",
                f"--robot.{side}_arm_config.can_timeout_s=0.2",
            ]
        for side, bus in (("left", left_leader), ("right", right_leader)):
            teleop += [
                f"--teleop.{side}_arm_config.port={bus.channel}",
                f"--teleop.{side}_arm_config.can_interface=virtual",
                f"--teleop.{side}_arm_config.can_timeout_s=0.2",
            ]
        for device in (robot, teleop):
            result = CliRunner().invoke(cli, ["calibrate", *device], input="\n\n")
            assert result.exit_code == 0, result.output
        files = tmp_path / "calibration"
        assert (files / "robots/openarm_follower/bi_openarm_follower_left.json").is_file()
        assert (files / "teleoperators/openarm_leader/hands_right.json").is_file()

        root = tmp_path / "duo"
        result = CliRunner().invoke(
            cli,
            [
                "record",
                *robot,
                *teleop,
                f"--dataset.root={root}",
                "--dataset.single_task=hold",
                "--dataset.num_episodes=1",
                "--dataset.fps=15",
                "--dataset.episode_time_s=0.4",
                "--dataset.reset_time_s=0",
                *QUIET,
            ],
        )
        assert result.exit_code == 0, result.output
        reader = LeRobotDatasetReader(root)
        assert reader.meta.robot_type == "bi_openarm_follower"
        names = reader.meta.features["action"].names
        assert names[0] == "left_joint_1.pos" and names[-1] == "right_gripper.pos"
        assert len(names) == 16
    finally:
        for bus in emulated:
            bus.stop()


def test_setup_motors_says_at_once_that_damiao_ids_are_set_with_damiaos_tool(arm):
    result = CliRunner().invoke(cli, ["setup-motors", *robot_args(arm)], input="\n")
    assert result.exit_code == 1
    assert "get their ids from Damiao's debugging tool" in result.output
    assert "Connect the controller board" not in result.output


@pytest.mark.slow
@pytest.mark.lerobot
def test_lerobot_reads_an_openarm_recording_and_the_calibration_rlctl_wrote(arm, tmp_path, lerobot):
    """An OpenArm calibrated and recorded by rlctl, read by LeRobot 0.6.1: its own
    `OpenArmFollower` finds and loads the calibration file from the same place, records under
    the same feature names, uses the same joint limits for the side, and its `LeRobotDataset`
    reads the same frames."""
    saved = calibrate(arm, tmp_path)
    root = tmp_path / "wave"
    result = CliRunner().invoke(cli, record_args(arm, root, episodes=2))
    assert result.exit_code == 0, result.output
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps(
            {
                "dataset_root": str(root),
                "out": str(tmp_path / "items.npz"),
                "robot_id": "lab",
                "side": "right",
            }
        )
    )
    script = Path(__file__).with_name("lerobot_openarm.py")
    env = {**os.environ, "HF_LEROBOT_CALIBRATION": str(tmp_path / "calibration")}
    theirs = lerobot(script, job, env=env)

    robot, dataset = theirs["robot"], theirs["dataset"]
    assert robot["name"] == "openarm_follower"
    assert robot["action"] == [f"{j}.pos" for j in JOINTS]
    assert robot["calibration_path"] == str(saved) and robot["is_calibrated"]
    assert robot["calibration"] == json.loads(saved.read_text())
    ours = OpenArmFollowerConfig(port="x", side="right").effective_joint_limits()
    assert {k: tuple(v) for k, v in robot["joint_limits"].items()} == ours

    reader = LeRobotDatasetReader(root)
    names = {key: spec.names for key, spec in reader.meta.features.items()}
    assert robot["dataset_features"]["action"] == names["action"]
    assert robot["dataset_features"]["observation.state"] == names["observation.state"]
    assert dataset["robot_type"] == reader.meta.robot_type == "openarm_follower"
    assert dataset["len"] == len(reader) and dataset["episodes"] == 2
    with np.load(tmp_path / "items.npz") as arrays:
        for i in range(len(reader)):
            item = reader[i]
            assert dataset["tasks"][i] == item["task"] == "wave"
            for key in ("action", "observation.state", "timestamp", "episode_index"):
                np.testing.assert_array_equal(arrays[f"{i}/{key}"], item[key].numpy())
