"""`unitree_g1` against an emulated bridge (`g1_bridge.py`: LeRobot's `run_g1_server.py` messages on
real ZeroMQ sockets on localhost): LeRobot 0.6.1's config, features and command messages, every
command through the guard, and one clear error per fault (no bridge, the bridge going silent,
unusable state messages)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import zmq

from rlctl.adapters.robots.config import RobotConfig, UnitreeG1Config
from rlctl.adapters.robots.unitree_g1 import BadState, UnitreeG1Robot, parse_lowstate
from rlctl.adapters.robots.unitree_g1_joints import FEATURE_NAMES, JOINT_NAMES, LOWER, UPPER
from rlctl.domain.config import structure
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput

from .g1_bridge import EmulatedBridge, free_port

pytestmark = pytest.mark.timeout(60)

LEROBOT_KP = [150, 150, 150, 300, 40, 40] * 2 + [250] * 3 + ([50, 50, 80, 80] + [40] * 3) * 2
LEROBOT_KD = [2, 2, 2, 4, 2, 2] * 2 + [5] * 3 + ([3] * 4 + [1.5] * 3) * 2


def config(bridge: EmulatedBridge | None = None, **settings) -> UnitreeG1Config:
    raw = {
        "type": "unitree_g1",
        "is_simulation": False,
        "robot_ip": "127.0.0.1",
        "lowcmd_port": bridge.lowcmd_port if bridge else free_port(),
        "lowstate_port": bridge.lowstate_port if bridge else free_port(),
        "connect_timeout_s": 3.0,
        "observation_timeout_s": 0.3,
    }
    return structure({**raw, **settings}, RobotConfig)


@pytest.fixture
def bridge():
    with EmulatedBridge() as running:
        yield running


@pytest.fixture
def robot(bridge):
    robot = UnitreeG1Robot(config(bridge))
    robot.connect()
    robot.reset()
    yield robot
    robot.disconnect()


def test_lerobots_defaults_names_and_order():
    ours = UnitreeG1Config(is_simulation=False)
    assert ours.kp == LEROBOT_KP and ours.kd == LEROBOT_KD
    assert ours.default_positions == [0.0] * 29
    assert ours.robot_ip == "192.168.123.164" and ours.control_dt == pytest.approx(1 / 250)
    assert (ours.lowcmd_port, ours.lowstate_port) == (6000, 6001)
    assert JOINT_NAMES[0] == "kLeftHipPitch" and JOINT_NAMES[12] == "kWaistYaw"
    assert JOINT_NAMES[15] == "kLeftShoulderPitch" and JOINT_NAMES[28] == "kRightWristYaw"
    robot = UnitreeG1Robot(ours)
    state = robot.observation_features["observation.state"]
    assert state.names == [f"{name}.q" for name in JOINT_NAMES] and state.shape == (29,)
    assert robot.action_features["action"].names == list(FEATURE_NAMES)
    assert robot.robot_type == "unitree_g1"


@pytest.mark.parametrize(
    ("settings", "where", "words"),
    [
        ({"is_simulation": True}, "robot.is_simulation", "MuJoCo"),
        ({"controller": "WalkerController"}, "robot.controller", "not one of"),
        ({"kp": [1.0] * 28}, "robot.kp", "28 values"),
        ({"kd": [1.0] * 28 + [-1.0]}, "robot.kd", "kRightWristYaw"),
        ({"kp": [1.0] * 28 + [math.nan]}, "robot.kp", "finite"),
        ({"default_positions": [0.0] * 5 + [1.0] + [0.0] * 23}, "robot.default_positions", "Ankle"),
        ({"robot_ip": ""}, "robot.robot_ip", "name the robot"),
        ({"robot_ip": "192.168.123.164:6000"}, "robot.robot_ip", "holds a port"),
        ({"lowstate_port": 70000}, "robot.lowstate_port", "1..65535"),
        ({"observation_timeout_s": 0}, "robot.observation_timeout_s", "positive"),
        ({"max_relative_target": -1}, "robot.max_relative_target", "positive"),
    ],
)
def test_what_cannot_be_done_is_refused_in_one_line(settings, where, words):
    raw = {"type": "unitree_g1", "is_simulation": False, **settings}
    with pytest.raises(ConfigError) as caught:
        structure(raw, RobotConfig)
    assert caught.value.where == where and words in caught.value.message, caught.value


def test_gravity_compensation_sends_the_torques_that_hold_the_arms(bridge, tmp_path):
    pytest.importorskip("pinocchio", reason="the gravity compensation needs the unitree_g1 extra")
    from rlctl.adapters.kinematics.g1_arm_ik import load_g1_arm_ik
    from rlctl.adapters.teleop.virtual_unitree_g1_exo import write_assets

    assets = str(write_assets(tmp_path))
    robot = UnitreeG1Robot(config(bridge, gravity_compensation=True, assets=assets))
    robot.connect()
    robot.reset()
    try:
        goal = np.array([0.01 * i for i in range(29)]) + 0.05
        sent = robot.send_action(goal)
        commands = bridge.wait_for_commands(1)[-1]["data"]["motor_cmd"]
    finally:
        robot.disconnect()
    tau = np.array([command["tau"] for command in commands])
    expected = load_g1_arm_ik(assets).gravity_torques(np.asarray(sent[15:], float))
    np.testing.assert_allclose(tau[15:29], expected, atol=1e-9)
    assert np.abs(expected).max() > 0.1  # the arms weigh something
    assert not tau[:15].any() and not tau[29:].any()  # legs, waist and the spare entries: none


def test_gravity_compensation_without_the_urdf_fails_before_any_command(bridge, tmp_path):
    pytest.importorskip("pinocchio", reason="the gravity compensation needs the unitree_g1 extra")
    robot = UnitreeG1Robot(config(bridge, gravity_compensation=True, assets=str(tmp_path)))
    with pytest.raises(ConfigError, match="g1_body29_hand14") as caught:
        robot.connect()
    assert "lerobot/unitree-g1-mujoco" in caught.value.hint
    assert not robot.is_connected and bridge.commands == []


def test_lerobots_default_is_the_simulator_which_is_refused_with_the_way_out():
    with pytest.raises(ConfigError) as caught:
        structure({"type": "unitree_g1"}, RobotConfig)
    said = str(caught.value)
    assert "--robot.is_simulation=false" in said and "run_g1_server" in said, said


def test_connect_reads_the_joints_the_bridge_sends(bridge, robot):
    observation = robot.get_observation()
    state = observation["observation.state"]
    assert state.dtype == np.float32 and state.shape == (29,)
    np.testing.assert_allclose(state, [0.01 * i for i in range(29)], atol=1e-6)
    assert set(observation) == {"observation.state"}


def test_an_action_reaches_the_robot_in_lerobots_message(bridge, robot):
    goal = np.array([0.01 * i for i in range(29)], dtype=np.float32) + 0.05
    sent = robot.send_action(goal)
    np.testing.assert_allclose(sent, goal, atol=1e-6)
    message = bridge.wait_for_commands(1)[-1]
    assert message["topic"] == "rt/lowcmd"
    data = message["data"]
    assert data["mode_pr"] == 0 and data["mode_machine"] == 5
    commands = data["motor_cmd"]
    assert len(commands) == 35
    for i, command in enumerate(commands[:29]):
        assert set(command) == {"mode", "q", "dq", "kp", "kd", "tau"}
        assert command["mode"] == 1 and command["dq"] == 0.0 and command["tau"] == 0.0
        assert command["kp"] == LEROBOT_KP[i] and command["kd"] == LEROBOT_KD[i]
        assert command["q"] == pytest.approx(float(goal[i]), abs=1e-6)
    for command in commands[29:]:
        assert command == {"mode": 0, "q": 0.0, "dq": 0.0, "kp": 0.0, "kd": 0.0, "tau": 0.0}
    # The emulated robot went there, and the next observation says so.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        state = robot.get_observation()["observation.state"]
        if np.allclose(state, goal, atol=1e-6):
            break
        time.sleep(0.01)
    np.testing.assert_allclose(state, goal, atol=1e-6)


def test_the_guard_holds_nan_and_garbage_clips_overshoot_and_caps_steps(bridge, robot):
    present = np.array([0.01 * i for i in range(29)])
    first = present + 0.1
    robot.send_action(first)
    bridge.wait_for_commands(1)
    # NaN: the last safe goal is sent again.
    nan = first.copy()
    nan[3] = math.nan
    held = robot.send_action(nan)
    np.testing.assert_allclose(held, first, atol=1e-6)
    message = bridge.wait_for_commands(2)[-1]
    assert [c["q"] for c in message["data"]["motor_cmd"][:29]] == pytest.approx(first, abs=1e-6)
    # Far outside the knee's range (garbage): held too.
    garbage = first.copy()
    garbage[3] = 100.0
    np.testing.assert_allclose(robot.send_action(garbage), first, atol=1e-6)
    # Just past the ankle roll's upper limit: clipped to it.
    wait_until_state(robot, first)
    near = first.copy()
    near[5] = UPPER[5] + 0.02
    sent = robot.send_action(near)
    assert sent[5] == pytest.approx(UPPER[5], abs=1e-6)
    # A big step of the waist yaw: capped at max_relative_target (0.5 rad) from where it is.
    wait_until_state(robot, sent)
    far = sent.astype(np.float64).copy()
    far[12] = 2.5
    capped = robot.send_action(far)
    assert capped[12] == pytest.approx(sent[12] + 0.5, abs=1e-5)
    assert all(LOWER[i] <= capped[i] <= UPPER[i] for i in range(29))


def wait_until_state(robot: UnitreeG1Robot, expected, timeout_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if np.allclose(robot.get_observation()["observation.state"], expected, atol=1e-5):
            return
        time.sleep(0.01)
    raise AssertionError("the emulated robot did not get there")


def test_an_ipv6_address_reaches_the_bridge():
    try:
        bridge = EmulatedBridge(host="::1")
    except zmq.ZMQError:
        pytest.skip("no IPv6 loopback here")
    with bridge:
        robot = UnitreeG1Robot(config(bridge, robot_ip="::1"))
        robot.connect()
        try:
            assert robot.get_observation()["observation.state"][1] == pytest.approx(0.01)
        finally:
            robot.disconnect()
        assert bridge.wait_for_commands(1)  # the zero-gain command arrived


def test_a_wrong_sized_action_is_refused(robot):
    with pytest.raises(InvalidInput, match="29 values"):
        robot.send_action(np.zeros(7))


def test_a_non_finite_state_is_not_used_then_named(bridge, robot):
    good = robot.get_observation()["observation.state"]
    bridge.corrupt(3, 18)
    time.sleep(0.05)
    # Within observation_timeout_s the last good state stands.
    np.testing.assert_allclose(robot.get_observation()["observation.state"], good)
    time.sleep(0.4)
    with pytest.raises(HardwareError) as caught:
        robot.get_observation()
    message = caught.value.message
    assert "no finite position for kLeftKnee, kLeftElbow" in message, message
    assert f"tcp://127.0.0.1:{bridge.lowstate_port}" in message
    with pytest.raises(HardwareError):
        robot.send_action(good)  # nothing is commanded against a state that old


def test_the_bridge_going_silent_is_one_error_naming_it(bridge, robot):
    robot.get_observation()
    bridge.silence()
    time.sleep(0.5)
    with pytest.raises(HardwareError) as caught:
        robot.get_observation()
    error = caught.value
    assert f"the G1 bridge at tcp://127.0.0.1:{bridge.lowstate_port}" in error.message
    assert "run_g1_server" in error.hint and str(bridge.lowcmd_port) in error.hint
    commands = len(bridge.commands)
    with pytest.raises(HardwareError):
        robot.send_action(np.zeros(29))
    time.sleep(0.05)
    assert len(bridge.commands) == commands  # nothing was sent


def test_no_bridge_is_one_error_with_the_hint():
    robot = UnitreeG1Robot(config(connect_timeout_s=0.3))
    started = time.monotonic()
    with pytest.raises(HardwareError) as caught:
        robot.connect()
    assert time.monotonic() - started < 3
    assert "no state from the G1 bridge at tcp://127.0.0.1:" in caught.value.message
    assert "within 0.3 s" in caught.value.message
    assert "python -m lerobot.robots.unitree_g1.run_g1_server" in caught.value.hint
    assert not robot.is_connected


def test_disconnect_sends_lerobots_zero_gain_command(bridge):
    robot = UnitreeG1Robot(config(bridge))
    robot.connect()
    robot.disconnect()
    message = bridge.wait_for_commands(1)[-1]
    commands = message["data"]["motor_cmd"]
    assert all(c["kp"] == 0.0 and c["kd"] == 0.0 and c["tau"] == 0.0 for c in commands)
    assert [c["q"] for c in commands[:29]] == pytest.approx([0.01 * i for i in range(29)])
    robot.disconnect()  # twice is fine


def test_keeping_torque_on_disconnect_sends_nothing(bridge):
    robot = UnitreeG1Robot(config(bridge, disable_torque_on_disconnect=False))
    robot.connect()
    robot.disconnect()
    time.sleep(0.1)
    assert bridge.commands == []


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (b"not json", "not JSON"),
        (b'{"topic": "rt/lowstate", "data": {"motor_state": []}}', "0 motor states"),
        (b'{"data": {"motor_state": [{"q": 1e39}]}}', "1 motor states"),
    ],
)
def test_malformed_state_messages_say_what_is_wrong(payload, words):
    with pytest.raises(BadState, match=words):
        parse_lowstate(payload, 0.0)


@pytest.mark.parametrize("bad", [1e39, 10**400, None, "0.1", True, {"x": 1}])
def test_a_position_that_is_no_finite_float32_is_named(bad):
    motors: list = [{"q": 0.0}] * 35
    motors[2] = {"q": bad}
    payload = json.dumps({"data": {"motor_state": motors}}).encode()
    with pytest.raises(BadState, match=r"no finite position for kLeftHipYaw$"):
        parse_lowstate(payload, 0.0)


def test_a_good_state_message_gives_the_positions_and_mode():
    motors = [{"q": 0.5 * i, "dq": 1.0} for i in range(35)]
    payload = json.dumps(
        {"topic": "rt/lowstate", "data": {"motor_state": motors, "mode_machine": 7}}
    )
    state = parse_lowstate(payload.encode(), 12.5)
    assert state.q.tolist() == [0.5 * i for i in range(29)]
    assert (state.mode_machine, state.received_at) == (7, 12.5)


def test_the_same_port_twice_is_refused():
    with pytest.raises(ConfigError, match="both 6001"):
        structure({"type": "unitree_g1", "is_simulation": False, "lowcmd_port": 6001}, RobotConfig)


def test_cameras_and_no_step_cap_from_settings():
    settings = {
        "type": "unitree_g1",
        "is_simulation": False,
        "max_relative_target": None,
        "cameras": {
            "head": {
                "type": "zmq",
                "server_address": "192.168.123.164",
                "camera_name": "head_camera",
                "width": 640,
                "height": 480,
                "fps": 30,
            }
        },
    }
    ours = structure(settings, RobotConfig)
    assert ours.max_relative_target is None
    head = UnitreeG1Robot(ours).observation_features["observation.images.head"]
    assert head.shape == (480, 640, 3)
