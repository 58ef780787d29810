"""SO-101 and Koch arms on virtual servo buses through the real SDKs: calibration saved in
LeRobot's layout and reused, motors configured as LeRobot configures them, a leader driving a
follower, and the calibration file read by LeRobot itself."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles, calibration_root
from rlctl.adapters.robots.config import KochFollowerConfig, SO101FollowerConfig
from rlctl.adapters.robots.koch_follower import koch_follower
from rlctl.adapters.robots.so_follower import SO_JOINTS, so_follower
from rlctl.adapters.teleop.config import KochLeaderConfig, SO101LeaderConfig
from rlctl.adapters.teleop.koch_leader import koch_leader
from rlctl.adapters.teleop.so_leader import so_leader
from rlctl.application.ports.robot import CalibrationKey
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.errors import CalibrationError

KOCH_FOLLOWER = dict(zip(range(1, 7), ["xl430-w250"] * 2 + ["xl330-m288"] * 4, strict=True))


@pytest.fixture(autouse=True)
def patient_buses(monkeypatch):
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 250.0)
    monkeypatch.setattr(DynamixelMotorBus, "default_timeout_margin_ms", 250.0)


@pytest.fixture
def virtual():
    started = []

    def start(family, models):
        bus = VirtualServoBus(family, models, tau_s=0.01).start()
        started.append(bus)
        return bus

    yield start
    for bus in started:
        bus.stop()


def sweep(bus: VirtualServoBus, positions):
    def move(poll: int) -> None:
        for motor in bus.motors:
            motor.move_by_hand(positions[min(poll - 1, len(positions) - 1)])

    return move


def full_range(ids_names) -> Calibration:
    return Calibration({name: MotorCalibration(i, 0, 0, 0, 4095) for i, name in ids_names})


def test_so101_calibration_is_saved_in_lerobots_layout_and_restored(virtual, tmp_path):
    bus = virtual("feetech", dict.fromkeys(range(1, 7), "sts3215"))
    store = CalibrationFiles(tmp_path)
    robot = so_follower(SO101FollowerConfig(port=bus.port, id="black"), calibration_store=store)
    robot.connect()
    try:
        (arm,) = robot.calibration_targets()
        assert not arm.is_calibrated
        console = ScriptedConsole([""], enter_after_polls=3, on_poll=sweep(bus, [1000, 3000]))
        outcome = CalibrateRobot(store, console, ManualClock())(arm)
    finally:
        robot.disconnect()
    path = tmp_path / "robots" / "so_follower" / "black.json"
    assert outcome.location == str(path)
    saved = json.loads(path.read_text())
    assert list(saved) == list(SO_JOINTS)
    assert saved["elbow_flex"] == {
        "id": 3,
        "drive_mode": 0,
        "homing_offset": 1,  # the shaft sat at 2048 and now reads 2047, half a turn
        "range_min": 999,
        "range_max": 2999,
    }
    assert (saved["wrist_roll"]["range_min"], saved["wrist_roll"]["range_max"]) == (0, 4095)
    motor = bus.motor(3)
    assert motor.register("Min_Position_Limit") == 999 and motor.register("Homing_Offset") == 1
    assert (
        motor.register("P_Coefficient") == 16 and bus.motor(6).register("Max_Torque_Limit") == 500
    )

    # Another arm with this id: the motors are given the saved calibration on connect.
    for m in bus.motors:
        m.set_register("Torque_Enable", 0)
        m.set_register("Lock", 0)
        m.set_register("Homing_Offset", 0)
    again = so_follower(SO101FollowerConfig(port=bus.port, id="black"), calibration_store=store)
    again.connect()
    try:
        assert again.calibration_targets()[0].is_calibrated
        assert bus.motor(3).register("Homing_Offset") == 1
        middle = again.get_observation()["observation.state"]
        assert middle.shape == (6,) and np.all(np.isfinite(middle))
    finally:
        again.disconnect()


def test_a_leader_drives_a_follower(virtual, tmp_path):
    ids_names = list(enumerate(SO_JOINTS, start=1))
    store = CalibrationFiles(tmp_path)
    follower_bus = virtual("feetech", dict.fromkeys(range(1, 7), "sts3215"))
    leader_bus = virtual("feetech", dict.fromkeys(range(1, 7), "sts3215"))
    store.save(CalibrationKey("robots", "so_follower", "f"), full_range(ids_names))
    store.save(CalibrationKey("teleoperators", "so_leader", "l"), full_range(ids_names))
    robot = so_follower(
        SO101FollowerConfig(port=follower_bus.port, id="f", max_relative_target=10.0),
        calibration_store=store,
    )
    leader = so_leader(SO101LeaderConfig(port=leader_bus.port, id="l"), calibration_store=store)
    leader.connect()
    robot.connect()
    try:
        assert not leader_bus.motor(1).torque_enabled and follower_bus.motor(1).torque_enabled
        leader_bus.motor(2).move_by_hand(2048 + 400)  # about 35 degrees
        action = leader.get_action({})
        assert action[1] == pytest.approx(400 * 360 / 4095, abs=0.2)
        # Read before sending: once the goal is set the virtual motor starts moving.
        before = robot.get_observation()["observation.state"][1]
        sent = robot.send_action(action)
        assert sent[1] == pytest.approx(before + 10, abs=0.2)
    finally:
        robot.disconnect()
        leader.disconnect()
    assert not follower_bus.motor(1).torque_enabled


def test_koch_arms_use_extended_position_and_an_inverted_leader_elbow(virtual, tmp_path):
    store = CalibrationFiles(tmp_path)
    follower_bus = virtual("dynamixel", KOCH_FOLLOWER)
    leader_bus = virtual("dynamixel", dict.fromkeys(range(1, 7), "xl330-m077"))
    names = list(enumerate(SO_JOINTS, start=1))
    store.save(CalibrationKey("robots", "koch_follower", "f"), full_range(names))
    robot = koch_follower(
        KochFollowerConfig(port=follower_bus.port, id="f"), calibration_store=store
    )
    robot.connect()
    try:
        assert [follower_bus.motor(i).register("Operating_Mode") for i in range(1, 7)] == [
            4,
            4,
            4,
            4,
            4,
            5,
        ]
        assert follower_bus.motor(3).register("Position_P_Gain") == 1500
        assert follower_bus.motor(1).torque_enabled
    finally:
        robot.disconnect()

    leader = koch_leader(KochLeaderConfig(port=leader_bus.port, id="l"), calibration_store=store)
    leader.connect()
    try:
        console = ScriptedConsole(
            [""], enter_after_polls=2, on_poll=sweep(leader_bus, [1500, 2600])
        )
        calibration = CalibrateRobot(store, console, ManualClock())(
            leader.calibration_targets()[0]
        ).calibration
        assert calibration["elbow_flex"].drive_mode == 1
        assert leader_bus.motor(3).register("Drive_Mode") == 1
        assert leader_bus.motor(6).torque_enabled  # the gripper springs back to open
        assert leader.get_action({}).shape == (6,)
    finally:
        leader.disconnect()


def test_calibration_files_follow_lerobots_environment(tmp_path, monkeypatch):
    assert calibration_root({"HF_LEROBOT_CALIBRATION": "/c"}).as_posix() == "/c"
    assert calibration_root({"HF_LEROBOT_HOME": "/h"}).as_posix() == "/h/calibration"
    assert calibration_root({"HF_HOME": "/hf"}).as_posix() == "/hf/lerobot/calibration"
    assert calibration_root({}).as_posix().endswith(".cache/huggingface/lerobot/calibration")
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path))
    store = CalibrationFiles()
    key = CalibrationKey("teleoperators", "so_leader", None)
    assert store.path_for(key) == tmp_path / "teleoperators" / "so_leader" / "None.json"
    moved = CalibrationKey("robots", "so_follower", "x", directory=str(tmp_path / "mine"))
    assert store.path_for(moved) == tmp_path / "mine" / "x.json"
    assert store.load(key) is None
    store.path_for(key).parent.mkdir(parents=True)
    store.path_for(key).write_text('{"gripper": {"id": 6}}')
    with pytest.raises(CalibrationError, match=r"None\.json") as caught:
        store.load(key)
    assert "lacks drive_mode" in caught.value.message and "rlctl calibrate" in caught.value.hint


LEROBOT_READS = textwrap.dedent(
    """
    import json, sys, types
    from pathlib import Path
    from lerobot.robots.robot import Robot
    from lerobot.utils.constants import HF_LEROBOT_CALIBRATION, ROBOTS
    # LeRobot's own load and save, on the file its SO follower uses (no motor SDK needed).
    device = types.SimpleNamespace(
        calibration_fpath=HF_LEROBOT_CALIBRATION / ROBOTS / "so_follower" / "black.json"
    )
    Robot._load_calibration(device)
    print(json.dumps({m: vars(c) for m, c in device.calibration.items()}))
    device.calibration["gripper"].range_max = 3333
    Robot._save_calibration(device)
    """
)


@pytest.mark.lerobot
def test_lerobot_reads_our_calibration_and_we_read_its(tmp_path):
    python = os.environ.get("RLCTL_LEROBOT_PYTHON")
    if not python:
        pytest.skip("set RLCTL_LEROBOT_PYTHON to a Python with lerobot==0.6.1")
    ours = Calibration(
        {
            name: MotorCalibration(i, 0, i * 10 - 30, 500 + i, 3500 - i)
            for i, name in enumerate(SO_JOINTS, 1)
        }
    )
    key = CalibrationKey("robots", "so_follower", "black")
    store = CalibrationFiles(tmp_path)
    store.save(key, ours)
    result = subprocess.run(
        [python, "-c", LEROBOT_READS],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "HF_LEROBOT_CALIBRATION": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == ours.to_data()
    assert store.load(key)["gripper"].range_max == 3333
