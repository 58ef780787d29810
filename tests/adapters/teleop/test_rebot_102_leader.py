"""`rebot_102_leader` on emulated FashionStar servos (a pty speaking their UART protocol):
LeRobot 0.6.1's actions (unwrapped multi-turn angles, directions, ranges), its calibration file,
and faults named instead of papered over."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors import fashionstar_protocol as fs
from rlctl.adapters.motors.virtual_fashionstar import VirtualFashionStarBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.teleop.config import TELEOPERATOR_TYPES
from rlctl.adapters.teleop.rebot_102_leader import Rebot102Leader, unwrap
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.errors import CalibrationError, ConfigError, HardwareError

pytestmark = pytest.mark.timeout(30)

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_yaw", "wrist_roll"]
JOINTS += ["gripper"]


@pytest.fixture
def servos():
    with VirtualFashionStarBus(ids=range(7)) as bus:
        yield bus


def build(port, tmp_path, timeout_s=0.2, **fields) -> Rebot102Leader:
    config = TELEOPERATOR_TYPES.make(
        "rebot_102_leader", port=port, id="hand", timeout_s=timeout_s, retries=1, **fields
    )
    leader = config.build(CalibrationFiles(tmp_path))
    assert isinstance(leader, Rebot102Leader)
    return leader


def calibrate(leader, tmp_path) -> dict:
    CalibrateRobot(CalibrationFiles(tmp_path), ScriptedConsole(answers=[""]), ManualClock())(
        leader.calibration_targets()[0]
    )
    return json.loads((tmp_path / "teleoperators/rebot_102_leader/hand.json").read_text())


def test_the_protocol_matches_motorbridge_smart_servo():
    # motorbridge-smart-servo's ping of servo 1 and its checksum rule.
    assert fs.ping(1) == bytes([0x12, 0x4C, 1, 1, 1, (0x12 + 0x4C + 1 + 1 + 1) & 0xFF])
    assert fs.sync_monitor([0, 1])[:9] == bytes([0x12, 0x4C, 25, 5, 22, 1, 2, 0, 1])
    assert fs.set_origin(3)[4:6] == bytes([3, 0])
    reader = fs.PacketReader(fs.ANSWER_HEADER)
    monitor = fs.Monitor(4, 12000, 10, 20, 30, 0, -123.4, -1)
    packets = reader.feed(b"\x00\x05" + fs.encode_monitor(monitor) + fs.answer(1, b"\x02")[:-1])
    assert [fs.decode_monitor(p) for p in packets] == [monitor]
    assert reader.feed(fs.answer(1, b"\x02")[-1:]) == [fs.Packet(1, b"\x02")]
    bad = fs.answer(1, b"\x02")[:-1] + b"\x00"
    assert reader.feed(bad) == [] and reader.bad_checksums == 1


def test_unwrap_is_lerobots_round_to_valid_range():
    assert unwrap(370.0, -150, 150) == pytest.approx(10.0)
    assert unwrap(-725.0, -200, 1) == pytest.approx(-5.0)
    assert unwrap(1620.0, 0, 270) == pytest.approx(180.0)


def test_calibration_sets_each_origin_and_saves_lerobots_file(servos, tmp_path):
    leader = build(servos.port, tmp_path)
    leader.connect()
    try:
        with pytest.raises(CalibrationError, match="no calibration"):
            leader.get_action({})
        for servo_id in range(7):
            servos.move(servo_id, 33.0 + servo_id)
        saved = calibrate(leader, tmp_path)
        assert saved["gripper"] == {
            "id": 6,
            "drive_mode": 0,
            "homing_offset": 0,
            "range_min": -270,
            "range_max": 0,
        }
        assert saved["shoulder_pan"]["range_min"] == -150
        assert all(s.angle == 0.0 and not s.locked for s in servos.servos.values())
        np.testing.assert_allclose(leader.get_action({}), np.zeros(7))
    finally:
        leader.disconnect()


def test_actions_are_lerobots(servos, tmp_path):
    leader = build(servos.port, tmp_path)
    leader.connect()
    try:
        calibrate(leader, tmp_path)
        assert leader.action_features["action"].names == [f"{j}.pos" for j in JOINTS]
        servos.move(0, 20.0)  # direction -1: -20
        servos.move(1, 360.0 + 45.0)  # a turn too many, direction -1: -45
        servos.move(2, -30.0)
        servos.move(3, 100.0)  # past wrist_flex's 90: clipped
        servos.move(6, 10.0)  # the gripper's -6: -60
        action = leader.get_action({})
        np.testing.assert_allclose(action, [-20, -45, -30, 90, 0, 0, -60], atol=0.05)
    finally:
        leader.disconnect()


def test_a_servo_that_stops_answering_is_named(servos, tmp_path):
    # Time enough for the retry's answers on a loaded machine (0.2 s once was not).
    leader = build(servos.port, tmp_path, timeout_s=1.0)
    leader.connect()
    try:
        calibrate(leader, tmp_path)
        servos.drop_replies(2)  # one lost answer is asked again
        servos.corrupt_replies(3)
        leader.get_action({})
        servos.unplug(4)
        with pytest.raises(HardwareError, match=r"servo 'wrist_yaw' \(id 4\) did not answer") as e:
            leader.get_action({})
        assert e.value.where == servos.port
    finally:
        leader.disconnect()


def test_connect_names_a_missing_servo_a_wrong_port_and_a_missing_device(servos, tmp_path):
    servos.unplug(5)
    with pytest.raises(HardwareError, match=r"servo 'wrist_roll' \(id 5\) did not answer a ping"):
        build(servos.port, tmp_path).connect()
    for servo_id in range(7):
        servos.unplug(servo_id)
    with pytest.raises(HardwareError, match="no FashionStar servo answered") as wrong:
        build(servos.port, tmp_path, timeout_s=0.02).connect()
    assert "leader's port" in (wrong.value.hint or "")
    with pytest.raises(HardwareError, match="cannot open the serial port") as missing:
        build("/dev/rlctl-no-such-leader", tmp_path).connect()
    assert "find-port" in (missing.value.hint or "")
    with pytest.raises(ConfigError, match="joint_directions has no entry for gripper"):
        build(servos.port, tmp_path, joint_directions={j: 1 for j in JOINTS[:-1]})
