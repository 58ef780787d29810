"""`rlctl record | teleoperate | replay | calibrate | setup-motors` on a bimanual SO robot as a
user types them: four virtual servo buses (two follower arms, two leader arms) the real Feetech
SDK talks to; a motor that stops answering mid-episode leaves the finished episodes whole and
the error names the arm and the motor."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.bimanual import BimanualFollower
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.so_follower import SO_JOINTS
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.application.ports.robot import CalibrationKey
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.entrypoints.cli.main import cli

from .conftest import fail_at_tick

QUIET = ["--controls=off", "--progress=silent"]
NAMES = [f"{side}_{joint}.pos" for side in ("left", "right") for joint in SO_JOINTS]


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


class Rig:
    def __init__(self, buses: dict[str, VirtualServoBus]) -> None:
        self.buses = buses

    def args(self, *, teleop: bool = True) -> list[str]:
        b = self.buses
        robot = [
            "--robot.type=bi_so_follower",
            "--robot.id=duo",
            f"--robot.left_arm_config.port={b['left'].port}",
            f"--robot.right_arm_config.port={b['right'].port}",
        ]
        leader = [
            "--teleop.type=bi_so_leader",
            "--teleop.id=hands",
            f"--teleop.left_arm_config.port={b['leader_left'].port}",
            f"--teleop.right_arm_config.port={b['leader_right'].port}",
        ]
        return robot + (leader if teleop else [])


@pytest.fixture
def rig(so_calibration, monkeypatch) -> Iterator[Rig]:
    """Calibrated virtual bimanual arms; a thread moves both leaders' joints as hands would."""
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 1000.0)
    for side in ("left", "right"):
        so_calibration("robots", "so_follower", f"duo_{side}")
        so_calibration("teleoperators", "so_leader", f"hands_{side}")
    buses = {
        name: VirtualServoBus.uniform(
            "feetech", "sts3215", range(1, 7), tau_s=0.02 if "leader" not in name else 0.05
        ).start()
        for name in ("left", "right", "leader_left", "leader_right")
    }
    stop = threading.Event()

    def hands() -> None:
        start = time.monotonic()
        while not stop.wait(0.01):
            t = time.monotonic() - start
            for phase, name in enumerate(("leader_left", "leader_right")):
                for motor in buses[name].motors:
                    wave = math.sin(2 * math.pi * t / 1.5 + motor.id + 2 * phase)
                    motor.move_by_hand(2048 + 300 * wave)

    mover = threading.Thread(target=hands, daemon=True)
    mover.start()
    yield Rig(buses)
    stop.set()
    mover.join()
    for bus in buses.values():
        bus.stop()


@pytest.mark.slow
def test_record_teleoperate_and_replay_on_a_virtual_bimanual_so101(rig, tmp_path):
    root = tmp_path / "handover"
    camera = "{type: synthetic, width: 64, height: 48, fps: 15}"
    result = invoke(
        "record",
        *rig.args(),
        f"--robot.cameras={{top: {camera}}}",
        f"--robot.left_arm_config.cameras={{wrist: {camera}}}",
        f"--dataset.root={root}",
        "--dataset.single_task=hand over the cube",
        "--dataset.num_episodes=2",
        "--dataset.fps=15",
        "--dataset.episode_time_s=1",
        "--dataset.reset_time_s=0.2",
        *QUIET,
    )
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    meta = reader.meta
    assert meta.robot_type == "bi_so_follower" and len(reader) == 30
    assert meta.features["action"].names == NAMES
    assert meta.features["observation.state"].names == NAMES
    assert {"observation.images.top", "observation.images.left_wrist"} <= set(meta.features)
    actions = np.stack([reader[i]["action"].numpy() for i in range(len(reader))])
    assert actions.std(axis=0).min() > 1.0  # both leaders moved, and every joint was recorded
    assert reader[0]["observation.images.left_wrist"].shape == (3, 48, 64)
    assert not any(rig.buses[side].motor(1).torque_enabled for side in ("left", "right"))
    check = invoke("dataset", "check", str(root))
    assert check.exit_code == 0, check.output

    result = invoke("teleoperate", *rig.args(), "--fps=30", "--teleop_time_s=0.5", *QUIET)
    assert result.exit_code == 0, result.output
    assert "teleoperated: 15 ticks" in result.output

    result = invoke(
        "replay",
        *rig.args(teleop=False),
        f"--dataset.root={root}",
        "--dataset.episode=1",
        "--progress=silent",
    )
    assert result.exit_code == 0, result.output
    assert "replayed episode 1: 15 actions" in result.output


@pytest.mark.slow
def test_a_motor_stopping_mid_episode_keeps_the_finished_episodes_and_names_arm_and_motor(
    rig, tmp_path, monkeypatch
):
    """The right arm's elbow stops answering on the 5th tick of the second episode."""
    fail_at_tick(monkeypatch, BimanualFollower, 2, 5, lambda: rig.buses["right"].unplug(3))
    root = tmp_path / "broken"
    result = CliRunner().invoke(
        cli,
        [
            "record",
            *rig.args(),
            f"--dataset.root={root}",
            "--dataset.single_task=hand over",
            "--dataset.num_episodes=3",
            "--dataset.fps=15",
            "--dataset.episode_time_s=1",
            "--dataset.reset_time_s=0",
            *QUIET,
        ],
    )
    assert result.exit_code == 1, result.output
    port = rig.buses["right"].port
    assert f"right arm, {port}: motor 'elbow_flex' (id 3) sent no status packet" in result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 1 and len(reader) == 15
    check = invoke("dataset", "check", str(root))
    assert check.exit_code == 0, check.output


@pytest.mark.slow
def test_calibrate_and_setup_motors_go_arm_by_arm(rig, tmp_path, monkeypatch):
    result = invoke("calibrate", *rig.args(teleop=False), "--reuse=yes")
    assert result.exit_code == 0, result.output
    assert "so_follower duo_left: using the saved calibration" in result.output
    assert "so_follower duo_right: using the saved calibration" in result.output

    # New motors: one per board, at the factory id 1, set up one after another. Only the
    # factory rate is scanned: a scan of every rate (seconds each at the slow ones) is the
    # buses' tests' business; here the arms' order and naming are.
    monkeypatch.setattr(FeetechMotorBus, "_family_baudrates", lambda self: [1_000_000])
    fresh = {side: VirtualServoBus.uniform("feetech", "sts3215", [1]).start() for side in "lr"}
    try:
        result = invoke(
            "setup-motors",
            "--teleop.type=bi_so_leader",
            "--teleop.id=hands",
            f"--teleop.left_arm_config.port={fresh['l'].port}",
            f"--teleop.right_arm_config.port={fresh['r'].port}",
            input="\n" * 12,
        )
    finally:
        for bus in fresh.values():
            bus.stop()
    assert result.exit_code == 0, result.output
    assert f"so_leader hands_left, on {fresh['l'].port}:" in result.output
    assert "so_leader hands_right: 6 motors set up" in result.output


@pytest.mark.slow
def test_a_camera_stopping_mid_recording_keeps_the_finished_episodes_and_names_it(rig, tmp_path):
    """The right arm's wrist camera stops delivering 3 s after it starts (45 frames at 15 fps):
    during the second 2 s episode on an idle machine, a later one on a loaded one."""
    root = tmp_path / "blind"
    result = CliRunner().invoke(
        cli,
        [
            "record",
            *rig.args(),
            "--robot.right_arm_config.cameras="
            "{wrist: {type: synthetic, width: 32, height: 24, fps: 15, stop_after: 45}}",
            f"--dataset.root={root}",
            "--dataset.single_task=hand over",
            "--dataset.num_episodes=4",
            "--dataset.fps=15",
            "--dataset.episode_time_s=2",
            "--dataset.reset_time_s=0",
            *QUIET,
        ],
    )
    assert result.exit_code == 1, result.output
    assert "error: right arm, camera 'wrist', synthetic 32x24@15: " in result.output
    assert "stopped delivering" in result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes >= 1 and len(reader) == 30 * reader.meta.total_episodes
    check = invoke("dataset", "check", str(root))
    assert check.exit_code == 0, check.output


def test_a_missing_arm_or_id_is_named_before_anything_opens(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    base = ["record", f"--dataset.root={tmp_path / 'x'}", "--robot.type=bi_so_follower"]
    result = CliRunner().invoke(cli, [*base, "--robot.id=duo", "--robot.right_arm_config.port=/b"])
    assert result.exit_code == 1
    assert "robot.left_arm_config: required but missing" in result.output
    ports = ["--robot.left_arm_config.port=/a", "--robot.right_arm_config.port=/b"]
    result = CliRunner().invoke(cli, [*base, *ports])
    assert result.exit_code == 1
    assert "robot.id: a bimanual device needs an id" in result.output
    assert "--robot.id=NAME" in result.output
    assert not (tmp_path / "x").exists()
    result = CliRunner().invoke(cli, ["record", "--robot.type=so101_follower", "--dataset.root=x"])
    assert "robot.port: required but missing" in result.output


@pytest.mark.slow
@pytest.mark.lerobot
def test_lerobot_reads_a_bimanual_recording_and_the_calibrations_as_rlctl_does(
    rig, tmp_path, lerobot
):
    """A bimanual recording made by `rlctl record` read by LeRobot 0.6.1: the same frames, names
    and robot type, under the features LeRobot's own `bi_so_follower` records; and LeRobot's
    `BiSOFollower` / `BiSOLeader` load the arms' calibration files rlctl uses."""
    root = tmp_path / "interop"
    result = invoke(
        "record",
        *rig.args(),
        "--robot.cameras={top: {type: synthetic, width: 64, height: 48, fps: 15}}",
        f"--dataset.root={root}",
        "--dataset.single_task=hand over the cube",
        "--dataset.num_episodes=2",
        "--dataset.fps=15",
        "--dataset.episode_time_s=0.6",
        "--dataset.reset_time_s=0",
        *QUIET,
    )
    assert result.exit_code == 0, result.output
    calibration = tmp_path / "calibration"
    # Calibrations as rlctl writes them, different per arm.
    store = CalibrationFiles(calibration)
    for n, side in enumerate(("left", "right")):
        entries = {
            joint: MotorCalibration(i, n, 10 * i - 40 + n, 400 + 20 * i + n, 3600 - 30 * i - n)
            for i, joint in enumerate(SO_JOINTS, 1)
        }
        store.save(CalibrationKey("robots", "so_follower", f"duo_{side}"), Calibration(entries))
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps(
            {
                "dataset_root": str(root),
                "out": str(tmp_path / "items.npz"),
                "follower_id": "duo",
                "leader_id": "hands",
            }
        )
    )
    script = Path(__file__).with_name("lerobot_bimanual.py")
    theirs = lerobot(script, job, env={**os.environ, "HF_LEROBOT_CALIBRATION": str(calibration)})

    robot, leader, dataset = theirs["robot"], theirs["leader"], theirs["dataset"]
    assert robot["name"] == "bi_so_follower" and leader["name"] == "bi_so_leader"
    assert robot["action"] == NAMES and leader["action"] == NAMES
    reader = LeRobotDatasetReader(root)
    ours = {key: spec.names for key, spec in reader.meta.features.items()}
    assert robot["dataset_features"]["action"] == ours["action"] == NAMES
    assert robot["dataset_features"]["observation.state"] == ours["observation.state"]
    for kind, device, name in (("robots", robot, "duo"), ("teleoperators", leader, "hands")):
        for side in ("left", "right"):
            folder = "so_follower" if kind == "robots" else "so_leader"
            path = calibration / kind / folder / f"{name}_{side}.json"
            assert device["arms"][side]["path"] == str(path)
            assert device["arms"][side]["calibration"] == json.loads(path.read_text())
            assert (
                store.load(CalibrationKey(kind, folder, f"{name}_{side}")).to_data()
                == (device["arms"][side]["calibration"])
            )

    assert dataset["robot_type"] == reader.meta.robot_type == "bi_so_follower"
    assert dataset["len"] == len(reader) == 18 and dataset["episodes"] == 2
    for key in ("action", "observation.state"):
        assert dataset["names"][key] == ours[key]
    with np.load(tmp_path / "items.npz") as arrays:
        for i in range(len(reader)):
            item = reader[i]
            assert dataset["tasks"][i] == item["task"] == "hand over the cube"
            for key in ("action", "observation.state", "episode_index", "frame_index", "index"):
                np.testing.assert_array_equal(arrays[f"{i}/{key}"], item[key].numpy(), key)
            np.testing.assert_allclose(
                arrays[f"{i}/timestamp"], item["timestamp"].numpy(), atol=1e-6
            )
            image = arrays[f"{i}/observation.images.top"]
            assert image.shape == (3, 48, 64)
            assert np.abs(image - item["observation.images.top"].numpy()).mean() < 0.02
