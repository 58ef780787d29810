"""`openarm_follower` on emulated Damiao motors (python-can's virtual interface): LeRobot's
fields, features and calibration file, goals through the safety guard, and the calibration
LeRobot's OpenArm runs (zero in the hanging pose, -90..90 for every joint)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.virtual_damiao import VirtualDamiaoMotors
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import ROBOT_TYPES, OpenArmFollowerConfig
from rlctl.adapters.robots.openarm_follower import OpenArmFollower
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.errors import CalibrationError, ConfigError, HardwareError

pytestmark = pytest.mark.timeout(30)

JOINTS = [f"joint_{i}" for i in range(1, 8)] + ["gripper"]
_channels = itertools.count()


def lerobot_calibration_file(root, robot_id: str) -> None:
    """What LeRobot 0.6.1's OpenArmFollower.calibrate saves."""
    folder = root / "robots" / "openarm_follower"
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        name: {"id": i, "drive_mode": 0, "homing_offset": 0, "range_min": -90, "range_max": 90}
        for i, name in enumerate(JOINTS, start=1)
    }
    (folder / f"{robot_id}.json").write_text(json.dumps(data, indent=4))


@pytest.fixture
def emulated():
    config = OpenArmFollowerConfig(port="x")
    motors = {send: (recv, model) for send, recv, model in config.motor_config.values()}
    with VirtualDamiaoMotors(f"openarm-test-{next(_channels)}", motors) as emulated:
        yield emulated


def build(emulated, tmp_path, **fields) -> OpenArmFollower:
    config = ROBOT_TYPES.make(
        "openarm_follower",
        port=emulated.channel,
        can_interface="virtual",
        can_timeout_s=0.2,
        can_retries=1,
        id="lab",
        **fields,
    )
    robot = config.build(CalibrationFiles(tmp_path))
    assert isinstance(robot, OpenArmFollower)
    return robot


def test_features_and_fields_are_lerobots(tmp_path, emulated):
    robot = build(emulated, tmp_path, side="right", use_velocity_and_torque=True)
    assert robot.robot_type == "openarm_follower"
    assert robot.action_features["action"].names == [f"{j}.pos" for j in JOINTS]
    state = robot.observation_features["observation.state"].names
    assert state[:4] == ["joint_1.pos", "joint_1.vel", "joint_1.torque", "joint_2.pos"]
    assert len(state) == 24
    with pytest.raises(ConfigError, match="side must be left, right or unset"):
        ROBOT_TYPES.make("openarm_follower", port="can0", side="middle")
    with pytest.raises(ConfigError, match="position_kp has 2 values for 8 motors"):
        build(emulated, tmp_path, position_kp=[1.0, 2.0])


def test_goals_pass_the_guard_and_reach_the_motors_with_the_configured_gains(tmp_path, emulated):
    lerobot_calibration_file(tmp_path, "lab")
    robot = build(emulated, tmp_path, side="right")
    robot.connect()
    try:
        assert robot.arm.is_calibrated
        assert all(m.enabled for m in emulated.motors.values())
        robot.reset()
        goal = np.array([10, 20, -30, 40, 5, -5, 0, -20], dtype=np.float32)
        sent = robot.send_action(goal)
        np.testing.assert_allclose(sent, goal)
        observed = robot.get_observation()["observation.state"]
        np.testing.assert_allclose(observed, goal, atol=0.05)
        assert emulated.motors[1].commands[-1].kp == pytest.approx(240.0, abs=0.2)
        assert emulated.motors[8].commands[-1].kd == pytest.approx(0.3, abs=0.01)

        # joint_2 of a right arm stops at 90: a small overshoot is clipped to it.
        sent = robot.send_action(np.array([10, 95, -30, 40, 5, -5, 0, -20], dtype=np.float32))
        assert sent[1] == 90.0 and emulated.motors[2].position == pytest.approx(90.0, abs=0.05)
        # NaN, or a value far outside the range, never reaches a motor: the last safe goal holds.
        for bad in (np.nan, 5000.0):
            action = np.array([10, 20, -30, 40, 5, -5, 0, bad], dtype=np.float32)
            np.testing.assert_allclose(robot.send_action(action), sent)
        assert emulated.motors[8].position == pytest.approx(-20.0, abs=0.05)
    finally:
        robot.disconnect()
    assert not any(m.enabled for m in emulated.motors.values())


def test_max_relative_target_caps_each_step_from_where_the_joint_is(tmp_path, emulated):
    lerobot_calibration_file(tmp_path, "lab")
    robot = build(emulated, tmp_path, side="left", max_relative_target=5.0)
    robot.connect()
    try:
        sent = robot.send_action(np.array([50, 0, 0, 100, 0, 0, 0, 0], dtype=np.float32))
        assert sent[0] == pytest.approx(5.0, abs=0.05) and sent[3] == pytest.approx(5.0, abs=0.05)
    finally:
        robot.disconnect()


def test_velocity_and_torque_come_from_the_same_refresh(tmp_path, emulated):
    lerobot_calibration_file(tmp_path, "lab")
    emulated.motors[3].velocity = 30.0
    emulated.motors[3].torque = 2.0
    robot = build(emulated, tmp_path, use_velocity_and_torque=True)
    robot.connect()
    try:
        state = robot.get_observation()["observation.state"]
        assert state.shape == (24,)
        assert state[7] == pytest.approx(30.0, abs=0.5) and state[8] == pytest.approx(2.0, abs=0.1)
    finally:
        robot.disconnect()


def test_calibration_zeroes_the_motors_and_saves_lerobots_file(tmp_path, emulated):
    for motor in emulated.motors.values():
        motor.position = 17.0
    robot = build(emulated, tmp_path)
    robot.connect()
    try:
        with pytest.raises(CalibrationError, match="no calibration"):
            robot.send_action(np.zeros(8, dtype=np.float32))
        console = ScriptedConsole([""])
        store = CalibrationFiles(tmp_path)
        outcome = CalibrateRobot(store, console, ManualClock())(robot.calibration_targets()[0])
        assert "hanging straight down, gripper closed" in console.prompts[0]
        saved = json.loads((tmp_path / "robots/openarm_follower/lab.json").read_text())
        assert saved["joint_4"] == {
            "id": 4,
            "drive_mode": 0,
            "homing_offset": 0,
            "range_min": -90,
            "range_max": 90,
        }
        assert list(saved) == JOINTS and outcome.location.endswith("openarm_follower/lab.json")
        assert all(abs(m.position) < 0.05 for m in emulated.motors.values())
        assert robot.arm.is_calibrated and all(m.enabled for m in emulated.motors.values())
    finally:
        robot.disconnect()


def test_a_motor_that_stops_answering_names_the_motor_and_the_bus(tmp_path, emulated):
    lerobot_calibration_file(tmp_path, "lab")
    robot = build(emulated, tmp_path, side="left")
    robot.connect()
    try:
        emulated.silence(6)
        with pytest.raises(HardwareError, match=r"motor 'joint_6' \(CAN id 0x06") as caught:
            robot.get_observation()
        assert caught.value.where == f"CAN bus {emulated.channel}"
    finally:
        robot.disconnect()


GARBAGE = [np.nan, np.inf, -np.inf, 1e30, 3e38, -1e4]


def test_garbage_in_either_half_of_a_bimanual_openarm_moves_no_motor(tmp_path):
    """NaN, infinities and absurd values in one arm's half: that arm holds its last safe goal,
    the other still moves, and no goal ever leaves its side's joint limits."""
    config = OpenArmFollowerConfig(port="x")
    motors = {send: (recv, model) for send, recv, model in config.motor_config.values()}
    sides = {}
    with (
        VirtualDamiaoMotors(f"openarm-test-{next(_channels)}", motors) as left,
        VirtualDamiaoMotors(f"openarm-test-{next(_channels)}", motors) as right,
    ):
        for side, bus in (("left", left), ("right", right)):
            lerobot_calibration_file(tmp_path, f"duo_{side}")
            sides[side] = {
                "port": bus.channel,
                "side": side,
                "can_interface": "virtual",
                "can_timeout_s": 0.2,
            }
        robot = ROBOT_TYPES.make(
            "bi_openarm_follower",
            id="duo",
            left_arm_config=sides["left"],
            right_arm_config=sides["right"],
        ).build(CalibrationFiles(tmp_path))
        robot.connect()
        try:
            robot.reset()
            safe = np.zeros(16, dtype=np.float32)
            safe[3] = safe[11] = 45.0  # joint_4 lives in 0..135
            robot.send_action(safe)
            for bad in GARBAGE:
                action = safe.copy()
                action[2] = bad  # the left arm's joint_3
                action[8] = 10.0 if np.isfinite(bad) else 20.0  # the right arm's joint_1 moves
                sent = robot.send_action(action)
                assert np.all(np.isfinite(sent))
                assert left.motors[3].position == pytest.approx(0.0, abs=0.05), bad
                assert right.motors[1].position == pytest.approx(action[8], abs=0.05), bad
            # Past the right arm's joint_2 limit (-9..90) by a little: clipped to it.
            action = safe.copy()
            action[9] = 95.0
            robot.send_action(action)
            assert right.motors[2].position == pytest.approx(90.0, abs=0.05)
            for motor in [*left.motors.values(), *right.motors.values()]:
                assert all(np.isfinite(c.position_deg) for c in motor.commands)
        finally:
            robot.disconnect()


@pytest.mark.parametrize(
    "bounds", [(-math.inf, math.inf), (5.0, -5.0), (0.0, math.nan), ("a", 1.0), (1.0,)]
)
def test_joint_limits_that_would_leave_the_guard_open_are_refused(bounds):
    with pytest.raises(ConfigError, match="the limits of 'joint_1' must be two finite degrees"):
        OpenArmFollowerConfig(port="can0", joint_limits={"joint_1": bounds})
