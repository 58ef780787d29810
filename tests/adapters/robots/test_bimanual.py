"""Bimanual SO arms (`bi_so_follower`, `bi_so_leader`) on four virtual servo buses through the
real Feetech SDK: LeRobot's feature names, one calibration file per arm where LeRobot keeps them,
a leader pair driving a follower pair, and every failure naming its arm."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.bimanual import BimanualFollower
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import BiSOFollowerConfig, RobotConfig, SOFollowerArmConfig
from rlctl.adapters.robots.so_follower import SO_JOINTS
from rlctl.adapters.teleop.bimanual_leader import BimanualLeader
from rlctl.adapters.teleop.config import (
    BiSOLeaderConfig,
    SOLeaderArmConfig,
    TeleoperatorConfig,
)
from rlctl.application.ports.robot import CalibrationKey
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.config import converter
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput

NAMES = [f"{side}_{joint}.pos" for side in ("left", "right") for joint in SO_JOINTS]


@pytest.fixture(autouse=True)
def patient_buses(monkeypatch):
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 250.0)


@pytest.fixture
def buses():
    started: list[VirtualServoBus] = []

    def start(n: int = 1) -> list[VirtualServoBus]:
        new = [
            VirtualServoBus.uniform("feetech", "sts3215", range(1, 7), tau_s=0.01).start()
            for _ in range(n)
        ]
        started.extend(new)
        return new

    yield start
    for bus in started:
        bus.stop()


def full_range() -> Calibration:
    return Calibration(
        {name: MotorCalibration(i, 0, 0, 0, 4095) for i, name in enumerate(SO_JOINTS, 1)}
    )


def follower_config(left: str, right: str, **kwargs) -> BiSOFollowerConfig:
    return BiSOFollowerConfig(
        id="duo",
        left_arm_config=SOFollowerArmConfig(port=left),
        right_arm_config=SOFollowerArmConfig(port=right),
        **kwargs,
    )


def test_lerobots_settings_and_names(tmp_path):
    config = converter.structure(
        {
            "type": "bi_so_follower",
            "id": "duo",
            "left_arm_config": {
                "port": "/dev/a",
                "max_relative_target": 5,
                "cameras": {"wrist": {"type": "synthetic", "width": 32, "height": 24}},
            },
            "right_arm_config": {"port": "/dev/b", "use_degrees": False},
            "cameras": {"top": {"type": "synthetic", "width": 64, "height": 48}},
        },
        RobotConfig,
    )
    robot = config.build(CalibrationFiles(tmp_path))
    assert robot.robot_type == "bi_so_follower"
    assert robot.action_features["action"].names == NAMES
    features = robot.observation_features
    assert features["observation.state"].names == NAMES
    # LeRobot's order and names: the left arm's cameras prefixed, the robot's own as they are.
    assert list(features) == [
        "observation.state",
        "observation.images.left_wrist",
        "observation.images.top",
    ]
    assert features["observation.images.top"].shape == (48, 64, 3)
    keys = [target.calibration_key for target in robot.calibration_targets()]
    assert keys == [
        CalibrationKey("robots", "so_follower", "duo_left"),
        CalibrationKey("robots", "so_follower", "duo_right"),
    ]
    assert config.arm("left").max_relative_target == 5.0
    assert config.arm("right").use_degrees is False
    stripped = config.without_cameras()
    assert not stripped.cameras and not stripped.left_arm_config.cameras

    leader = converter.structure(
        {
            "type": "bi_so_leader",
            "id": "hands",
            "left_arm_config": {"port": "/dev/c"},
            "right_arm_config": {"port": "/dev/d"},
        },
        TeleoperatorConfig,
    ).build(CalibrationFiles(tmp_path))
    assert leader.teleop_type == "bi_so_leader"
    assert leader.action_features["action"].names == NAMES
    assert [t.calibration_key.id for t in leader.calibration_targets()] == [
        "hands_left",
        "hands_right",
    ]


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (
            BiSOFollowerConfig(
                left_arm_config=SOFollowerArmConfig(port="/dev/a"),
                right_arm_config=SOFollowerArmConfig(port="/dev/b"),
            ),
            "needs an id",
        ),
        (follower_config("/dev/a", "/dev/a"), "both arms are given the port"),
    ],
)
def test_a_bimanual_config_that_would_lose_a_calibration_is_refused(config, says, tmp_path):
    with pytest.raises(ConfigError, match=says) as caught:
        config.build(CalibrationFiles(tmp_path))
    assert caught.value.hint


def test_a_camera_name_used_twice_is_refused(tmp_path):
    camera = {"type": "synthetic", "width": 32, "height": 24}
    data = {
        "type": "bi_so_follower",
        "id": "duo",
        "left_arm_config": {"port": "/dev/a", "cameras": {"wrist": camera}},
        "right_arm_config": {"port": "/dev/b"},
        "cameras": {"left_wrist": camera},
    }
    with pytest.raises(ConfigError, match="'left_wrist' is used twice"):
        converter.structure(data, RobotConfig).build(CalibrationFiles(tmp_path))
    data["cameras"] = {"wrist": camera}  # LeRobot refuses this one too
    with pytest.raises(ConfigError, match="'wrist' is used twice"):
        converter.structure(data, RobotConfig).build(CalibrationFiles(tmp_path))


@pytest.mark.slow
def test_each_arm_is_calibrated_in_its_own_lerobot_file_and_leaders_drive_followers(
    buses, tmp_path
):
    left, right, leader_left, leader_right = buses(4)
    store = CalibrationFiles(tmp_path)
    robot = follower_config(left.port, right.port).build(store)
    assert isinstance(robot, BimanualFollower)
    robot.connect()
    try:
        targets = robot.calibration_targets()
        assert [t.is_calibrated for t in targets] == [False, False]
        for target, bus in zip(targets, (left, right), strict=True):

            def sweep(poll, bus=bus):
                for motor in bus.motors:
                    motor.move_by_hand([1000, 3000][min(poll - 1, 1)])

            console = ScriptedConsole([""], enter_after_polls=3, on_poll=sweep)
            CalibrateRobot(store, console, ManualClock())(target)
            assert any("so_follower duo_" in p for p in console.prompts + console.shown)
    finally:
        robot.disconnect()
    for side in ("left", "right"):
        saved = json.loads((tmp_path / "robots" / "so_follower" / f"duo_{side}.json").read_text())
        assert list(saved) == list(SO_JOINTS)
        assert saved["elbow_flex"]["range_min"] == 999

    store.save(CalibrationKey("teleoperators", "so_leader", "hands_left"), full_range())
    store.save(CalibrationKey("teleoperators", "so_leader", "hands_right"), full_range())
    leader = BiSOLeaderConfig(
        id="hands",
        left_arm_config=SOLeaderArmConfig(port=leader_left.port),
        right_arm_config=SOLeaderArmConfig(port=leader_right.port),
    ).build(store)
    assert isinstance(leader, BimanualLeader)
    robot = follower_config(left.port, right.port).build(store)
    leader.connect()
    robot.connect()
    try:
        leader_right.motor(2).move_by_hand(2048 + 400)
        action = leader.get_action({})
        assert action.shape == (12,)
        assert action[7] == pytest.approx(400 * 360 / 4095, abs=0.2)
        assert abs(action[1]) < 0.2  # the left shoulder_lift was not moved
        robot.get_observation()
        sent = robot.send_action(action)
        assert sent.shape == (12,)
        robot.get_observation()  # answered after the write: the write has landed
        goal = right.motor(2).register("Goal_Position")
        assert goal != left.motor(2).register("Goal_Position")
    finally:
        robot.disconnect()
        leader.disconnect()
    assert not left.motor(1).torque_enabled and not right.motor(1).torque_enabled


@pytest.mark.slow
def test_a_motor_that_stops_answering_is_named_with_its_arm(buses, tmp_path):
    left, right, leader_left, leader_right = buses(4)
    store = CalibrationFiles(tmp_path)
    for side in ("left", "right"):
        store.save(CalibrationKey("robots", "so_follower", f"duo_{side}"), full_range())
        store.save(CalibrationKey("teleoperators", "so_leader", f"hands_{side}"), full_range())
    robot = follower_config(left.port, right.port).build(store)
    leader = BiSOLeaderConfig(
        id="hands",
        left_arm_config=SOLeaderArmConfig(port=leader_left.port),
        right_arm_config=SOLeaderArmConfig(port=leader_right.port),
    ).build(store)
    robot.connect()
    leader.connect()
    try:
        robot.get_observation()
        right.unplug(3)
        with pytest.raises(HardwareError) as caught:
            robot.get_observation()
        assert caught.value.message.startswith("motor 'elbow_flex' (id 3)")
        assert caught.value.where == f"right arm, {right.port}"
        right.plug(3)
        leader_left.faults.corrupt_replies(motor_id=5, count=10)
        with pytest.raises(HardwareError) as caught:
            leader.get_action({})
        assert caught.value.where == f"left arm, {leader_left.port}"
        assert caught.value.message.startswith("motor 'wrist_roll' (id 5)")
        assert "corrupt" in caught.value.message
        leader_left.faults.clear()
        with pytest.raises(InvalidInput, match="takes 12"):
            robot.send_action(np.zeros(6))
    finally:
        robot.disconnect()
        leader.disconnect()


@pytest.mark.slow
def test_a_missing_or_wrong_port_names_the_arm(buses, tmp_path):
    (left,) = buses(1)
    robot = follower_config(left.port, str(tmp_path / "ttyNOPE")).build(CalibrationFiles(tmp_path))
    with pytest.raises(HardwareError) as caught:
        robot.connect()
    assert caught.value.where.startswith("right arm")
    assert str(tmp_path / "ttyNOPE") in str(caught.value)
    assert not robot.is_connected and not robot.arms["left"].arm.is_connected
