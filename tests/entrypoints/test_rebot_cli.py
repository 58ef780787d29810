"""`rlctl calibrate | teleoperate | record` with a reBot Arm 102 leader driving a reBot B601
follower, as a user types them: the leader's FashionStar servos on a pty that speaks their
protocol, the follower's Damiao motors on python-can's virtual interface. A follower motor that
stops answering mid-episode leaves the finished episodes whole, and the error names it."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.motors.virtual_damiao import VirtualDamiaoMotors
from rlctl.adapters.motors.virtual_fashionstar import VirtualFashionStarBus
from rlctl.adapters.robots.config import REBOT_B601_JOINTS, RebotB601FollowerConfig
from rlctl.adapters.robots.rebot_b601_follower import MOTOR_MODELS, RebotB601Follower
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.timeout(90)

QUIET = ["--controls=off", "--progress=silent"]
_channels = itertools.count()


def b601_motors() -> dict[int, tuple[int, str]]:
    ids = RebotB601FollowerConfig(port="x").motor_can_ids
    return {send: (recv, MOTOR_MODELS[name]) for name, (send, recv) in ids.items()}


@pytest.fixture
def rig(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    channel = f"rebot-cli-{next(_channels)}"
    with (
        VirtualDamiaoMotors(channel, b601_motors()) as follower,
        VirtualFashionStarBus(ids=range(7)) as leader,
    ):
        yield follower, leader


def robot_args(follower, prefix="--robot.") -> list[str]:
    return [
        f"{prefix}port={follower.channel}",
        f"{prefix}can_adapter=virtual",
        f"{prefix}can_timeout_s=0.2",
        f"{prefix}can_retries=1",
    ]


def leader_args(leader, prefix="--teleop.") -> list[str]:
    return [f"{prefix}port={leader.port}", f"{prefix}timeout_s=0.2", f"{prefix}retries=1"]


def calibrate_both(follower, leader, tmp_path) -> None:
    robot = ["--robot.type=rebot_b601_follower", "--robot.id=lab", *robot_args(follower)]
    teleop = ["--teleop.type=rebot_102_leader", "--teleop.id=hand", *leader_args(leader)]
    for device in (robot, teleop):
        result = CliRunner().invoke(cli, ["calibrate", *device], input="\n")
        assert result.exit_code == 0, result.output
    files = tmp_path / "calibration"
    saved = json.loads((files / "robots/rebot_b601_follower/lab.json").read_text())
    assert saved["gripper"]["range_min"] == -270
    saved = json.loads((files / "teleoperators/rebot_102_leader/hand.json").read_text())
    assert saved["wrist_flex"] == {
        "id": 3,
        "drive_mode": 0,
        "homing_offset": 0,
        "range_min": -80,
        "range_max": 90,
    }


def record_args(follower, leader, root, episodes: int) -> list[str]:
    return [
        "record",
        "--robot.type=rebot_b601_follower",
        "--robot.id=lab",
        *robot_args(follower),
        "--teleop.type=rebot_102_leader",
        "--teleop.id=hand",
        *leader_args(leader),
        f"--dataset.root={root}",
        "--dataset.single_task=pick",
        f"--dataset.num_episodes={episodes}",
        "--dataset.fps=15",
        "--dataset.episode_time_s=0.6",
        "--dataset.reset_time_s=0",
        *QUIET,
    ]


@pytest.mark.slow
def test_the_leader_teleoperates_and_records_with_the_follower(rig, tmp_path):
    follower, leader = rig
    calibrate_both(follower, leader, tmp_path)
    leader.move(2, -30.0)  # elbow_flex, direction 1
    leader.move(6, 10.0)  # the gripper, direction -6: -60
    result = CliRunner().invoke(
        cli,
        [
            "teleoperate",
            "--robot.type=rebot_b601_follower",
            "--robot.id=lab",
            *robot_args(follower),
            "--teleop.type=rebot_102_leader",
            "--teleop.id=hand",
            *leader_args(leader),
            "--fps=30",
            "--teleop_time_s=0.3",
            *QUIET,
        ],
    )
    assert result.exit_code == 0, result.output
    assert follower.motors[3].position == pytest.approx(-30.0, abs=0.05)
    assert follower.motors[7].position == pytest.approx(-60.0, abs=0.05)
    assert follower.motors[7].control_mode == 4  # the gripper in force-position mode

    leader.move(0, 400.0)  # a turn and 40 degrees: -40 once unwrapped (direction -1)
    root = tmp_path / "pick"
    result = CliRunner().invoke(cli, record_args(follower, leader, root, episodes=2))
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.robot_type == "rebot_b601_follower" and reader.meta.total_episodes == 2
    assert reader.meta.features["action"].names == [f"{j}.pos" for j in REBOT_B601_JOINTS]
    actions = np.stack([reader[i]["action"].numpy() for i in range(len(reader))])
    np.testing.assert_allclose(actions[:, 0], -40.0, atol=0.05)
    np.testing.assert_allclose(actions[:, 6], -60.0, atol=0.05)
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output
    assert not any(m.enabled for m in follower.motors.values())


@pytest.mark.slow
def test_a_motor_dying_mid_episode_keeps_the_finished_ones(rig, tmp_path, monkeypatch):
    follower, leader = rig
    calibrate_both(follower, leader, tmp_path)
    ticks = {"resets": 0, "reads": 0}
    original_reset = RebotB601Follower.reset
    original_read = RebotB601Follower.get_observation

    def reset(self):
        ticks["resets"] += 1
        ticks["reads"] = 0
        original_reset(self)

    def get_observation(self):
        ticks["reads"] += 1
        if ticks["resets"] == 2 and ticks["reads"] == 4:
            follower.silence(2)
        return original_read(self)

    monkeypatch.setattr(RebotB601Follower, "reset", reset)
    monkeypatch.setattr(RebotB601Follower, "get_observation", get_observation)
    root = tmp_path / "broken"
    result = CliRunner().invoke(cli, record_args(follower, leader, root, episodes=3))
    assert result.exit_code == 1, result.output
    assert f"CAN bus {follower.channel}" in result.output
    assert "motor 'shoulder_lift' (CAN id 0x02, answers on 0x12) did not answer" in result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 1 and len(reader) == 9
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output


@pytest.mark.slow
def test_a_leader_servo_unplugged_mid_episode_is_named(rig, tmp_path, monkeypatch):
    follower, leader = rig
    calibrate_both(follower, leader, tmp_path)
    reads = {"n": 0}
    original_read = RebotB601Follower.get_observation

    def get_observation(self):
        reads["n"] += 1
        if reads["n"] == 12:  # the second episode
            leader.unplug(5)
        return original_read(self)

    monkeypatch.setattr(RebotB601Follower, "get_observation", get_observation)
    root = tmp_path / "unplugged"
    result = CliRunner().invoke(cli, record_args(follower, leader, root, episodes=2))
    assert result.exit_code == 1, result.output
    assert "servo 'wrist_roll' (id 5) did not answer a position read" in result.output
    assert LeRobotDatasetReader(root).meta.total_episodes == 1


@pytest.mark.slow
def test_a_bimanual_pair_calibrates_arm_by_arm_and_records(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    followers = [VirtualDamiaoMotors(f"rebot-bi-{next(_channels)}", b601_motors()) for _ in "lr"]
    leaders = [VirtualFashionStarBus(ids=range(7)) for _ in "lr"]
    for part in (*followers, *leaders):
        part.start()
    try:
        robot = ["--robot.type=bi_rebot_b601_follower", "--robot.id=duo"]
        teleop = ["--teleop.type=bi_rebot_102_leader", "--teleop.id=hands"]
        for side, follower, leader in zip(("left", "right"), followers, leaders, strict=True):
            robot += robot_args(follower, f"--robot.{side}_arm_config.")
            teleop += leader_args(leader, f"--teleop.{side}_arm_config.")
        for device in (robot, teleop):
            result = CliRunner().invoke(cli, ["calibrate", *device], input="\n\n")
            assert result.exit_code == 0, result.output
        files = tmp_path / "calibration"
        assert (files / "robots/rebot_b601_follower/duo_left.json").is_file()
        assert (files / "teleoperators/rebot_102_leader/hands_right.json").is_file()

        leaders[1].move(4, 25.0)  # the right wrist_yaw
        root = tmp_path / "duo"
        result = CliRunner().invoke(
            cli,
            [
                "record",
                *robot,
                *teleop,
                f"--dataset.root={root}",
                "--dataset.single_task=handover",
                "--dataset.num_episodes=1",
                "--dataset.fps=15",
                "--dataset.episode_time_s=0.4",
                "--dataset.reset_time_s=0",
                *QUIET,
            ],
        )
        assert result.exit_code == 0, result.output
        reader = LeRobotDatasetReader(root)
        assert reader.meta.robot_type == "bi_rebot_b601_follower"
        names = reader.meta.features["action"].names
        assert names[0] == "left_shoulder_pan.pos" and names[-1] == "right_gripper.pos"
        assert followers[1].motors[5].position == pytest.approx(25.0, abs=0.05)
        assert followers[0].motors[5].position == pytest.approx(0.0, abs=0.05)
    finally:
        for part in (*followers, *leaders):
            part.stop()


@pytest.mark.slow
def test_a_missing_leader_or_bridge_is_one_line_with_a_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    result = CliRunner().invoke(
        cli, ["calibrate", "--teleop.type=rebot_102_leader", "--teleop.port=/dev/rlctl-none"]
    )
    assert result.exit_code == 1, result.output
    assert "/dev/rlctl-none" in result.output and "cannot open the serial port" in result.output
    assert "rlctl find-port" in result.output
    result = CliRunner().invoke(
        cli, ["calibrate", "--robot.type=rebot_b601_follower", "--robot.port=/dev/rlctl-none"]
    )
    assert result.exit_code == 1, result.output
    assert "cannot open Damiao's USB-CAN bridge" in result.output
    assert "/dev/rlctl-none" in result.output and "can_adapter=socketcan" in result.output
    result = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--robot.type=rebot_b601_follower",
            "--robot.port=x",
            "--robot.id=a",
            "--robot.can_adapter=pcan",
        ],
    )
    assert result.exit_code != 0 and "can_adapter" in result.output and "socketcan" in result.output
