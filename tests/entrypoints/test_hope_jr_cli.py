"""`rlctl calibrate | record | teleoperate` with the Homunculus exoskeleton driving a Hope JR arm
and the glove driving the hand, as a user types them: the Feetech servos on virtual buses the
real SDK talks to, the boards' ESP32 lines printed on a pty; calibrations in LeRobot's files,
the recordings checked by `rlctl dataset check`; a board that goes silent mid-recording keeps the
finished episodes and is named."""

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

from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.hope_jr import ARM_JOINTS, HAND_INVERSIONS, HAND_MOTORS
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.teleop.homunculus import GLOVE_JOINTS
from rlctl.adapters.teleop.virtual_homunculus import VirtualHomunculusBoard
from rlctl.entrypoints.cli.main import cli

from .conftest import fail_at_tick

QUIET = ["--controls=off", "--progress=silent"]
NAMES = [f"{joint}.pos" for joint in ARM_JOINTS]
ARM = {1: "sm8512bl"} | dict.fromkeys(range(2, 8), "sts3250")
RIGHT_HAND_REVERSED = set(HAND_INVERSIONS["right"])


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


class Rig:
    def __init__(self, arm: VirtualServoBus, exo: VirtualHomunculusBoard, root: Path) -> None:
        self.arm, self.exo, self.calibration = arm, exo, root

    def args(self, *, teleop: bool = True) -> list[str]:
        robot = ["--robot.type=hope_jr_arm", "--robot.id=jr", f"--robot.port={self.arm.port}"]
        exo = ["--teleop.type=homunculus_arm", "--teleop.id=exo", f"--teleop.port={self.exo.port}"]
        return robot + (exo if teleop else [])


def save(root: Path, kind: str, device: str, name: str, calibration: dict) -> None:
    folder = root / kind / device
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(calibration, indent=4))


@pytest.fixture
def rig(tmp_path, monkeypatch) -> Iterator[Rig]:
    """A virtual Hope JR arm and exoskeleton, both calibrated in LeRobot's files; a thread
    moves the exoskeleton as an arm in it would."""
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 1000.0)
    root = tmp_path / "calibration"
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(root))
    joint = {"drive_mode": 0, "homing_offset": 0, "range_min": 1024, "range_max": 3072}
    save(
        root,
        "robots",
        "hope_jr_arm",
        "jr",
        {name: {"id": i, **joint} for i, name in enumerate(ARM_JOINTS, 1)},
    )
    save(
        root,
        "teleoperators",
        "homunculus_arm",
        "exo",
        {name: {"id": i, **joint} for i, name in enumerate(ARM_JOINTS)},
    )
    arm = VirtualServoBus("feetech", ARM, tau_s=0.02).start()
    exo = VirtualHomunculusBoard.arm().start()
    stop = threading.Event()

    def wearer() -> None:
        start = time.monotonic()
        while not stop.wait(0.01):
            t = time.monotonic() - start
            exo.set(
                **{
                    name: int(2048 + 900 * math.sin(2 * math.pi * t / 1.0 + i))
                    for i, name in enumerate(ARM_JOINTS)
                }
            )

    mover = threading.Thread(target=wearer, daemon=True)
    mover.start()
    yield Rig(arm, exo, root)
    stop.set()
    mover.join(timeout=5)
    exo.stop()
    arm.stop()


@pytest.mark.slow
def test_record_two_episodes_with_the_exoskeleton_driving_the_arm(rig, tmp_path):
    result = invoke("calibrate", *rig.args(teleop=False), "--reuse=yes")
    assert result.exit_code == 0, result.output
    assert rig.arm.motor(4).register("Max_Position_Limit") == 3072  # the file went to the motors

    root = tmp_path / "jr"
    result = invoke(
        "record",
        *rig.args(),
        "--robot.max_relative_target=40",
        "--robot.cameras={wrist: {type: synthetic, width: 64, height: 48, fps: 15}}",
        f"--dataset.root={root}",
        "--dataset.single_task=wave",
        "--dataset.num_episodes=2",
        "--dataset.fps=15",
        "--dataset.episode_time_s=0.8",
        "--dataset.reset_time_s=0",
        *QUIET,
    )
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.robot_type == "hope_jr_arm" and reader.meta.total_episodes == 2
    assert reader.meta.features["action"].names == NAMES
    assert reader.meta.features["observation.state"].names == NAMES
    actions = np.stack([reader[i]["action"].numpy() for i in range(len(reader))])
    assert actions.std(axis=0).min() > 0.5  # the exoskeleton's joints moved and were recorded
    assert np.abs(actions).max() <= 100.0  # within the calibrated range, through the guard
    assert not rig.arm.motor(1).torque_enabled  # let go at the end
    check = invoke("dataset", "check", str(root))
    assert check.exit_code == 0, check.output

    result = invoke("teleoperate", *rig.args(), "--fps=30", "--teleop_time_s=0.3", *QUIET)
    assert result.exit_code == 0, result.output
    assert "teleoperated: 9 ticks" in result.output


@pytest.mark.slow
def test_an_exoskeleton_going_silent_keeps_the_finished_episode_and_is_named(
    rig, tmp_path, monkeypatch
):
    """The exoskeleton's board stops printing on the 5th tick of the second episode."""
    fail_at_tick(monkeypatch, ArmFollower, 2, 5, rig.exo.pause)
    root = tmp_path / "silent"
    result = CliRunner().invoke(
        cli,
        [
            "record",
            *rig.args(),
            "--teleop.timeout_s=0.3",
            f"--dataset.root={root}",
            "--dataset.single_task=wave",
            "--dataset.num_episodes=3",
            "--dataset.fps=15",
            "--dataset.episode_time_s=0.6",
            "--dataset.reset_time_s=0",
            *QUIET,
        ],
    )
    assert result.exit_code == 1, result.output
    assert f"{rig.exo.port}: the homunculus_arm sent nothing for 0.3 s" in result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 1 and len(reader) == 9
    assert not any(m.torque_enabled for m in rig.arm.motors)  # the arm let go
    check = invoke("dataset", "check", str(root))
    assert check.exit_code == 0, check.output


@pytest.mark.slow
def test_a_hope_jr_motor_that_stops_answering_is_named(rig, tmp_path, monkeypatch):
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 200.0)  # it will not answer
    fail_at_tick(monkeypatch, ArmFollower, 1, 3, lambda: rig.arm.unplug(1))
    result = CliRunner().invoke(
        cli, ["teleoperate", *rig.args(), "--fps=30", "--teleop_time_s=2", *QUIET]
    )
    assert result.exit_code == 1, result.output
    assert f"{rig.arm.port}: motor 'shoulder_pitch' (id 1)" in result.output


@pytest.mark.slow
def test_the_glove_drives_the_hope_jr_hand_through_record(tmp_path, monkeypatch):
    """Calibrations made by LeRobot (its files) for a right glove and hand; the glove's
    readings become the hand's 16 goals; two episodes recorded and checked."""
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 1000.0)
    root = tmp_path / "calibration"
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(root))
    span = {"homing_offset": 0}
    save(
        root,
        "robots",
        "hope_jr_hand",
        "jr",
        {
            name: {
                "id": i,
                "drive_mode": int(name in RIGHT_HAND_REVERSED),
                **span,
                "range_min": 100,
                "range_max": 900,
            }
            for i, name in enumerate(HAND_MOTORS, 1)
        },
    )
    save(
        root,
        "teleoperators",
        "homunculus_glove",
        "g",
        {
            name: {"id": i, "drive_mode": 0, **span, "range_min": 1000, "range_max": 3000}
            for i, name in enumerate(GLOVE_JOINTS)
        },
    )
    hand = VirtualServoBus.uniform("feetech", "scs0009", range(1, 17), tau_s=0.02).start()
    glove = VirtualHomunculusBoard.glove().start()
    glove.set_all(2500)  # flexions 75, abductions 50
    args = [
        "--robot.type=hope_jr_hand",
        "--robot.side=right",
        "--robot.id=jr",
        f"--robot.port={hand.port}",
        "--teleop.type=homunculus_glove",
        "--teleop.side=right",
        "--teleop.id=g",
        f"--teleop.port={glove.port}",
    ]
    try:
        result = invoke("calibrate", *args[4:], "--reuse=yes")  # the glove's file, taken as is
        assert result.exit_code == 0, result.output
        assert "homunculus_glove g" in result.output
        dataset = tmp_path / "hand"
        result = invoke(
            "record",
            *args,
            f"--dataset.root={dataset}",
            "--dataset.single_task=grasp",
            "--dataset.num_episodes=2",
            "--dataset.fps=15",
            "--dataset.episode_time_s=0.5",
            "--dataset.reset_time_s=0",
            *QUIET,
        )
        assert result.exit_code == 0, result.output
        reader = LeRobotDatasetReader(dataset)
        assert reader.meta.robot_type == "hope_jr_hand" and reader.meta.total_episodes == 2
        assert reader.meta.features["action"].names == [f"{m}.pos" for m in HAND_MOTORS]
        last = dict(zip(HAND_MOTORS, reader[len(reader) - 1]["action"].numpy(), strict=True))
        assert last["index_radial_flexor"] == pytest.approx(50 * 0.3 + 75 * 0.7, abs=0.01)
        assert last["index_ulnar_flexor"] == pytest.approx(-50 * 0.3 + 75 * 0.7, abs=0.01)
        assert last["pinky_pip_dip"] == pytest.approx(75.0, abs=0.01)
        # pinky_pip_dip is reversed on a right hand: 75 % of 100..900 from the top.
        assert hand.motor(16).register("Goal_Position") == 300
        check = invoke("dataset", "check", str(dataset))
        assert check.exit_code == 0, check.output
    finally:
        glove.stop()
        hand.stop()
