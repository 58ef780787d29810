"""`rebot_b601_follower` on emulated Damiao motors (python-can's virtual interface, and Damiao's
USB-CAN serial bridge emulated on a pty): LeRobot 0.6.1's fields, features, control modes and
calibration file; goals through the safety guard; faults named."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors import damiao_protocol as dm
from rlctl.adapters.motors import damiao_serial
from rlctl.adapters.motors.virtual_damiao import VirtualDamiaoMotors
from rlctl.adapters.motors.virtual_damiao_bridge import VirtualDamiaoBridge
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import REBOT_B601_JOINTS, ROBOT_TYPES, RebotB601FollowerConfig
from rlctl.adapters.robots.rebot_b601_follower import MOTOR_MODELS, RebotB601Follower
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.errors import CalibrationError, ConfigError, HardwareError

pytestmark = pytest.mark.timeout(30)

JOINTS = list(REBOT_B601_JOINTS)
_channels = itertools.count()


def emulated_motors() -> dict[int, tuple[int, str]]:
    config = RebotB601FollowerConfig(port="x")
    return {send: (recv, MOTOR_MODELS[name]) for name, (send, recv) in config.motor_can_ids.items()}


def lerobot_calibration_file(root, robot_id: str) -> None:
    """What LeRobot 0.6.1's RebotB601Follower.calibrate saves (its joint limits as ranges)."""
    folder = root / "robots" / "rebot_b601_follower"
    folder.mkdir(parents=True, exist_ok=True)
    limits = RebotB601FollowerConfig(port="x").joint_limits
    data = {
        name: {
            "id": i,
            "drive_mode": 0,
            "homing_offset": 0,
            "range_min": int(limits[name][0]),
            "range_max": int(limits[name][1]),
        }
        for i, name in enumerate(JOINTS, start=1)
    }
    (folder / f"{robot_id}.json").write_text(json.dumps(data, indent=4))


@pytest.fixture
def emulated():
    with VirtualDamiaoMotors(f"rebot-test-{next(_channels)}", emulated_motors()) as emulated:
        yield emulated


def build(port, tmp_path, adapter="virtual", **fields) -> RebotB601Follower:
    config = ROBOT_TYPES.make(
        "rebot_b601_follower",
        port=port,
        can_adapter=adapter,
        can_timeout_s=0.2,
        can_retries=1,
        id="lab",
        **fields,
    )
    robot = config.build(CalibrationFiles(tmp_path))
    assert isinstance(robot, RebotB601Follower)
    return robot


def test_lerobot_features_and_defaults():
    config = RebotB601FollowerConfig(port="can0")
    assert config.can_adapter == "damiao" and config.control_mode == "mit"
    assert config.motor_can_ids["gripper"] == (0x07, 0x17)
    robot = ROBOT_TYPES.make("rebot_b601_follower", port="can0").build(CalibrationFiles("/x"))
    assert robot.robot_type == "rebot_b601_follower"
    assert robot.action_features["action"].names == [f"{j}.pos" for j in JOINTS]


def test_connect_sets_each_motors_mode_and_goals_go_through_the_guard(emulated, tmp_path):
    lerobot_calibration_file(tmp_path, "lab")
    robot = build(emulated.channel, tmp_path)
    robot.connect()
    try:
        # LeRobot's modes: the joints in MIT, the gripper in force-position.
        assert [emulated.motors[i].control_mode for i in range(1, 8)] == [1] * 6 + [4]
        assert all(m.enabled for m in emulated.motors.values())
        goal = np.asarray([10, -20, -30, 5, 0, 0, -100], dtype=np.float32)
        sent = robot.send_action(goal)
        np.testing.assert_allclose(sent, goal)
        mit = emulated.motors[2].commands[-1]
        assert mit.kp == pytest.approx(45.0, abs=0.2) and mit.position_deg == pytest.approx(
            -20.0, abs=0.05
        )
        mode, (position, velocity, ratio) = emulated.motors[7].mode_commands[-1]
        assert mode == dm.FORCE_POS_MODE and position == pytest.approx(-100.0, abs=1e-3)
        assert velocity == pytest.approx(900.0, abs=0.6) and ratio == pytest.approx(0.07)
        observed = robot.get_observation()["observation.state"]
        np.testing.assert_allclose(observed, goal, atol=0.05)
        # Past the joint limits: clipped to them (shoulder_lift stops at 1 degree).
        sent = robot.send_action(np.asarray([10, 3, -30, 5, 0, 0, -100], dtype=np.float32))
        assert sent[1] == 1.0 and emulated.motors[2].position == pytest.approx(1.0, abs=0.05)
        # Garbage is held, never sent.
        before = len(emulated.motors[1].commands)
        held = robot.send_action(np.asarray([np.nan] * 7, dtype=np.float32))
        assert np.isfinite(held).all() and emulated.motors[1].commands[
            -1
        ].position_deg == pytest.approx(10.0, abs=0.05)
        assert len(emulated.motors[1].commands) == before + 1
    finally:
        robot.disconnect()
    assert not any(m.enabled for m in emulated.motors.values())


def test_pos_vel_mode_and_a_step_cap(emulated, tmp_path):
    lerobot_calibration_file(tmp_path, "lab")
    robot = build(
        emulated.channel,
        tmp_path,
        control_mode="pos_vel",
        gripper_control_mode="mit",
        pos_vel_velocity=60.0,
        max_relative_target=5.0,
    )
    robot.connect()
    try:
        assert [emulated.motors[i].control_mode for i in range(1, 8)] == [2] * 6 + [1]
        sent = robot.send_action(np.asarray([20, 0, 0, 0, 0, 0, -3], dtype=np.float32))
        assert sent[0] == pytest.approx(5.0, abs=0.05)  # at most 5 degrees from where it was
        mode, (position, velocity) = emulated.motors[1].mode_commands[-1]
        assert mode == dm.POS_VEL_MODE and position == pytest.approx(5.0, abs=0.05)
        assert velocity == pytest.approx(60.0, abs=1e-3)
        gripper = emulated.motors[7].commands[-1]
        assert gripper.kp == pytest.approx(8.0, abs=0.2) and gripper.kd == pytest.approx(
            0.3, abs=0.01
        )
    finally:
        robot.disconnect()


def test_calibration_zeroes_the_motors_and_saves_lerobots_file(emulated, tmp_path):
    robot = build(emulated.channel, tmp_path)
    robot.connect()
    try:
        with pytest.raises(CalibrationError, match="no calibration") as raised:
            robot.send_action(np.zeros(7, dtype=np.float32))
        assert "rlctl calibrate" in (raised.value.hint or "")
        emulated.move(3, -42.0)
        console = ScriptedConsole(answers=[""])
        CalibrateRobot(CalibrationFiles(tmp_path), console, ManualClock())(
            robot.calibration_targets()[0]
        )
        assert "zero pose" in " ".join(console.prompts)
        assert emulated.motors[3].position == 0.0
        saved = json.loads((tmp_path / "robots/rebot_b601_follower/lab.json").read_text())
        assert saved["shoulder_lift"] == {
            "id": 2,
            "drive_mode": 0,
            "homing_offset": 0,
            "range_min": -200,
            "range_max": 1,
        }
        assert all(m.enabled for m in emulated.motors.values())
        robot.send_action(np.zeros(7, dtype=np.float32))
    finally:
        robot.disconnect()


def test_a_silent_or_faulty_motor_is_named(emulated, tmp_path):
    lerobot_calibration_file(tmp_path, "lab")
    emulated.silence(5)
    robot = build(emulated.channel, tmp_path)
    with pytest.raises(HardwareError, match=r"motor 'wrist_yaw' \(CAN id 0x05, answers on 0x15\)"):
        robot.connect()
    emulated.silence(5, False)
    robot.connect()
    try:
        emulated.fault(7, 0xA)
        with pytest.raises(HardwareError, match=r"'gripper'.*over-current"):
            robot.send_action(np.zeros(7, dtype=np.float32))
    finally:
        emulated.fault(7, None)
        robot.disconnect()


def test_a_motor_that_keeps_its_mode_is_refused(emulated, tmp_path):
    lerobot_calibration_file(tmp_path, "lab")
    emulated.motors[7].locked_mode = True
    robot = build(emulated.channel, tmp_path)
    with pytest.raises(HardwareError, match=r"'gripper'.*stays in MIT mode") as raised:
        robot.connect()
    assert "debugging tool" in (raised.value.hint or "")
    assert not robot.is_connected


def test_a_missing_can_channel_and_bad_settings_are_named(tmp_path):
    robot = build("can-nowhere", tmp_path, adapter="socketcan")
    with pytest.raises(HardwareError, match="can-nowhere") as raised:
        robot.connect()
    assert "setup-can" in (raised.value.hint or "")
    with pytest.raises(ConfigError, match="can_adapter") as bad:
        build("can0", tmp_path, adapter="pcan")
    assert "socketcan" in (bad.value.hint or "")
    with pytest.raises(ConfigError, match="mit_kp has 3 values for 7 motors"):
        build("can0", tmp_path, mit_kp=[1.0, 2.0, 3.0])
    with pytest.raises(ConfigError, match="control_mode"):
        build("can0", tmp_path, control_mode="torque")
    bridge = build("/dev/rlctl-no-such-bridge", tmp_path, adapter="damiao")
    with pytest.raises(HardwareError, match=r"cannot open Damiao's USB-CAN bridge.*no-such"):
        bridge.connect()


def test_the_damiao_serial_bridge_carries_the_same_exchanges(emulated, tmp_path):
    lerobot_calibration_file(tmp_path, "lab")
    with VirtualDamiaoBridge(emulated.channel) as bridge:
        robot = build(bridge.port, tmp_path, adapter="damiao")
        robot.connect()
        try:
            goal = np.asarray([3, -4, -5, 6, 7, 8, -9], dtype=np.float32)
            robot.send_action(goal)
            np.testing.assert_allclose(
                robot.get_observation()["observation.state"], goal, atol=0.05
            )
            emulated.silence(4)
            with pytest.raises(HardwareError, match="'wrist_flex'"):
                robot.get_observation()
            emulated.silence(4, False)
        finally:
            robot.disconnect()


def test_the_bridge_frames_are_motorbridges():
    raw = damiao_serial.encode_frame(0x301, bytes(range(8)))
    assert len(raw) == 30 and raw[:4] == b"\x55\xaa\x1e\x03"
    assert (
        raw[13:17] == (0x301).to_bytes(4, "little")
        and raw[18] == 8
        and raw[21:29] == bytes(range(8))
    )
    assert damiao_serial.decode_tx(raw) == (0x301, bytes(range(8)), False)
    rx = damiao_serial.encode_rx(0x17, b"\x17" + bytes(7))
    assert len(rx) == 16 and rx[0] == 0xAA and rx[1] == 0x11 and rx[15] == 0x55
