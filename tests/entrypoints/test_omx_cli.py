"""`rlctl calibrate | record | teleoperate` on a ROBOTIS OMX pair as a user types them: two
virtual Dynamixel buses (follower ids 11-16, leader ids 1-6) the real SDK talks to, no
calibration file beforehand (the factory's is written and saved on connect), the recording
checked by `rlctl dataset check`; a motor that stops answering mid-episode keeps the finished
episodes and is named."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.omx_follower import OMX_JOINTS
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

from .conftest import fail_at_tick

QUIET = ["--controls=off", "--progress=silent"]
NAMES = [f"{joint}.pos" for joint in OMX_JOINTS]
FOLLOWER = {11: "xl430-w250", 12: "xl430-w250", 13: "xl430-w250"} | dict.fromkeys(
    (14, 15, 16), "xl330-m288"
)
LEADER = dict.fromkeys(range(1, 6), "xl330-m288") | {6: "xl330-m077"}


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


class Rig:
    def __init__(self, follower: VirtualServoBus, leader: VirtualServoBus, root: Path) -> None:
        self.follower, self.leader, self.calibration = follower, leader, root

    def args(self, *, teleop: bool = True) -> list[str]:
        robot = ["--robot.type=omx_follower", "--robot.id=f", f"--robot.port={self.follower.port}"]
        leader = ["--teleop.type=omx_leader", "--teleop.id=l", f"--teleop.port={self.leader.port}"]
        return robot + (leader if teleop else [])


@pytest.fixture
def rig(tmp_path, monkeypatch) -> Iterator[Rig]:
    """A fresh virtual OMX pair, nothing calibrated; a thread moves the leader as a hand would."""
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(DynamixelMotorBus, "default_timeout_margin_ms", 1000.0)
    root = tmp_path / "calibration"
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(root))
    follower = VirtualServoBus("dynamixel", FOLLOWER, tau_s=0.02).start()
    leader = VirtualServoBus("dynamixel", LEADER).start()
    stop = threading.Event()

    def hand() -> None:
        start = time.monotonic()
        while not stop.wait(0.01):
            t = time.monotonic() - start
            for motor in leader.motors:
                motor.move_by_hand(2048 + 300 * math.sin(2 * math.pi * t / 1.5 + motor.id))

    mover = threading.Thread(target=hand, daemon=True)
    mover.start()
    yield Rig(follower, leader, root)
    stop.set()
    mover.join(timeout=5)
    follower.stop()
    leader.stop()


@pytest.mark.slow
def test_record_and_teleoperate_an_omx_pair_calibrated_at_the_factory(rig, tmp_path):
    root = tmp_path / "omx"
    result = invoke(
        "record",
        *rig.args(),
        "--robot.max_relative_target=20",
        "--robot.cameras={front: {type: synthetic, width: 64, height: 48, fps: 15}}",
        f"--dataset.root={root}",
        "--dataset.single_task=pick the cube",
        "--dataset.num_episodes=2",
        "--dataset.fps=15",
        "--dataset.episode_time_s=0.8",
        "--dataset.reset_time_s=0",
        *QUIET,
    )
    assert result.exit_code == 0, result.output
    devices = (("robots", "omx_follower", "f"), ("teleoperators", "omx_leader", "l"))
    for kind, device, name in devices:
        saved = json.loads((rig.calibration / kind / device / f"{name}.json").read_text())
        assert list(saved) == list(OMX_JOINTS)
        assert saved["gripper"]["homing_offset"] == (100 if kind == "teleoperators" else 0)
    reader = LeRobotDatasetReader(root)
    assert reader.meta.robot_type == "omx_follower" and len(reader) == 24
    assert reader.meta.features["action"].names == NAMES
    assert reader.meta.features["observation.state"].names == NAMES
    actions = np.stack([reader[i]["action"].numpy() for i in range(len(reader))])
    assert actions[:, :5].std(axis=0).min() > 1.0  # the leader's joints moved and were recorded
    assert not rig.follower.motor(11).torque_enabled
    check = invoke("dataset", "check", str(root))
    assert check.exit_code == 0, check.output

    result = invoke("teleoperate", *rig.args(), "--fps=30", "--teleop_time_s=0.3", *QUIET)
    assert result.exit_code == 0, result.output
    assert "teleoperated: 9 ticks" in result.output


def test_calibrate_writes_the_factory_calibration_without_a_question(rig):
    result = invoke("calibrate", *rig.args(teleop=False), "--reuse=no")
    assert result.exit_code == 0, result.output
    path = rig.calibration / "robots" / "omx_follower" / "f.json"
    assert "factory calibration" in result.output and str(path) in result.output
    assert json.loads(path.read_text())["elbow_flex"] == {
        "id": 13,
        "drive_mode": 0,
        "homing_offset": 0,
        "range_min": 0,
        "range_max": 4095,
    }


def test_calibrate_after_a_first_connect_asks_nothing_about_the_factory_file_it_wrote(rig):
    """Teleoperating a fresh OMX wrote its factory calibration; calibrating it then has nothing
    to ask (reusing the file or writing it again are the same calibration)."""
    first = invoke("teleoperate", *rig.args(), "--fps=30", "--teleop_time_s=0.1", *QUIET)
    assert first.exit_code == 0, first.output
    result = CliRunner().invoke(cli, ["calibrate", *rig.args(teleop=False)], input="")
    assert result.exit_code == 0, result.output
    assert "Enter" not in result.output and "ENTER" not in result.output, result.output
    assert "using the saved calibration" in result.output


@pytest.mark.slow
def test_a_motor_stopping_mid_episode_keeps_the_finished_episodes_and_is_named(
    rig, tmp_path, monkeypatch
):
    """The follower's elbow stops answering on the 5th tick of the second episode."""
    fail_at_tick(monkeypatch, ArmFollower, 2, 5, lambda: rig.follower.unplug(13))
    root = tmp_path / "broken"
    result = CliRunner().invoke(
        cli,
        [
            "record",
            *rig.args(),
            f"--dataset.root={root}",
            "--dataset.single_task=pick",
            "--dataset.num_episodes=3",
            "--dataset.fps=15",
            "--dataset.episode_time_s=0.6",
            "--dataset.reset_time_s=0",
            *QUIET,
        ],
    )
    assert result.exit_code == 1, result.output
    assert f"{rig.follower.port}: motor 'elbow_flex' (id 13) sent no status packet" in (
        result.output
    )
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 1 and len(reader) == 9
    check = invoke("dataset", "check", str(root))
    assert check.exit_code == 0, check.output
