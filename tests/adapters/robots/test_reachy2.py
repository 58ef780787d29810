"""`reachy2`, `reachy2_teleoperator` and `reachy2_camera` against an emulated Reachy 2 (a real gRPC
server on localhost, `reachy2_server.py`): LeRobot 0.6.1's features, units and defaults, commands
reaching the emulated joints through the guard, and one clear error per fault (no server, a part
missing or not answering, slow replies, the server dying)."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import time

import numpy as np
import pytest

from rlctl.adapters.cameras.config import CameraConfig, Reachy2CameraConfig
from rlctl.adapters.robots.config import Reachy2RobotConfig, RobotConfig
from rlctl.adapters.robots.reachy2 import Reachy2Robot
from rlctl.adapters.teleop.config import TeleoperatorConfig
from rlctl.adapters.teleop.reachy2_teleoperator import Reachy2Teleoperator
from rlctl.domain.config import converter, structure
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput

from .reachy2_server import EmulatedReachy, ReachyServer

pytestmark = pytest.mark.timeout(60)

NECK = ["neck_yaw.pos", "neck_pitch.pos", "neck_roll.pos"]


def arm(side: str) -> list[str]:
    joints = ["shoulder_pitch", "shoulder_roll", "elbow_yaw", "elbow_pitch"]
    joints += ["wrist_roll", "wrist_pitch", "wrist_yaw", "gripper"]
    return [f"{side}_{joint}.pos" for joint in joints]


ALL = [
    *NECK,
    *arm("l"),
    *arm("r"),
    "l_antenna.pos",
    "r_antenna.pos",
    "mobile_base.vx",
    "mobile_base.vy",
    "mobile_base.vtheta",
]
# (feature, emulated joint) for the values checks.
EMULATED = {
    "neck_yaw.pos": ("head", "neck", "yaw"),
    "l_shoulder_pitch.pos": ("l_arm", "shoulder", "pitch"),
    "l_shoulder_roll.pos": ("l_arm", "shoulder", "roll"),
    "l_elbow_yaw.pos": ("l_arm", "elbow", "yaw"),
    "r_wrist_yaw.pos": ("r_arm", "wrist", "yaw"),
    "r_gripper.pos": ("r_hand", "gripper", ""),
    "l_antenna.pos": ("head", "l_antenna", ""),
}


@pytest.fixture
def server():
    with ReachyServer() as running:
        yield running


def config(server: ReachyServer | None, **settings) -> Reachy2RobotConfig:
    port = server.port if server is not None else free_port()
    raw = {"type": "reachy2", "ip_address": "127.0.0.1", "sdk_port": port, "port": port}
    return converter.structure({**raw, **settings}, RobotConfig)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def robot(server):
    made = Reachy2Robot(config(server))
    made.connect()
    yield made
    made.disconnect()


def test_config_has_lerobots_fields_and_defaults():
    made = converter.structure({"type": "reachy2"}, RobotConfig)
    assert isinstance(made, Reachy2RobotConfig)
    assert (made.ip_address, made.port, made.sdk_port) == ("localhost", 50065, 50051)
    assert made.max_relative_target is None and not made.use_external_commands
    assert not made.disable_torque_on_disconnect
    assert (made.camera_width, made.camera_height) == (640, 480)
    assert made.all_cameras() == {}
    with pytest.raises(ConfigError, match="no Reachy 2 part"):
        structure(
            {
                "type": "reachy2",
                "with_mobile_base": False,
                "with_l_arm": False,
                "with_r_arm": False,
                "with_neck": False,
                "with_antennas": False,
            },
            RobotConfig,
        )
    with pytest.raises(ConfigError, match="image_type"):
        structure({"type": "reachy2_camera", "name": "depth", "image_type": "depth"}, CameraConfig)


def test_the_camera_flags_add_lerobots_cameras_at_the_robots_address():
    made = converter.structure(
        {
            "type": "reachy2",
            "ip_address": "10.0.0.7",
            "with_left_teleop_camera": True,
            "with_torso_camera": True,
            "camera_width": 320,
            "camera_height": 240,
        },
        RobotConfig,
    )
    cameras = made.all_cameras()
    assert list(cameras) == ["teleop_left", "torso_rgb"]
    left = cameras["teleop_left"]
    assert isinstance(left, Reachy2CameraConfig)
    assert (left.name, left.image_type, left.ip_address, left.port) == (
        "teleop",
        "left",
        "10.0.0.7",
        50065,
    )
    assert (left.width, left.height) == (320, 240)
    assert made.without_cameras().all_cameras() == {}  # type: ignore[attr-defined]


def test_features_are_lerobots_and_follow_the_parts_in_use(server):
    full = Reachy2Robot(config(server))
    assert full.observation_features["observation.state"].names == ALL
    assert full.action_features["action"].names == ALL
    some = Reachy2Robot(
        config(server, with_l_arm=False, with_mobile_base=False, with_antennas=False)
    )
    assert some.action_features["action"].names == [*NECK, *arm("r")]


def test_connect_turns_the_parts_on_and_reads_degrees(robot, server):
    emulated = server.robot
    calls = emulated.calls
    assert calls[0] == "GetReachy"
    for part in ("head", "l_arm", "r_arm", "l_hand", "r_hand", "mobile_base"):
        assert f"TurnOn {part}" in calls and emulated.on[part]
    # Slowly on, then LeRobot's reset_default_limits; the base in velocity mode (CMD_VEL).
    assert calls.index("SetSpeedLimit l_arm 1") < calls.index("TurnOn l_arm")
    assert calls.index("TurnOn l_arm") < calls.index("SetSpeedLimit l_arm 100")
    assert "SetTorqueLimit head 100" in calls and "SetZuuuMode 1" in calls
    state = robot.get_observation()["observation.state"]
    assert state.dtype == np.float32 and state.shape == (len(ALL),)
    for name, joint in EMULATED.items():
        assert state[ALL.index(name)] == pytest.approx(emulated.degrees(*joint), abs=1e-4), name
    assert list(state[-3:]) == [0.0, 0.0, 0.0]


def test_send_action_reaches_the_emulated_joints_and_base(robot, server):
    emulated = server.robot
    action = robot.get_observation()["observation.state"].copy()
    action[ALL.index("neck_yaw.pos")] = 20.0
    action[ALL.index("l_elbow_yaw.pos")] = -35.0
    action[ALL.index("r_gripper.pos")] = 40.0
    action[ALL.index("r_antenna.pos")] = 15.0
    action[-3:] = [0.3, -0.1, 45.0]
    sent = robot.send_action(action)
    np.testing.assert_allclose(sent, action, atol=1e-5)
    assert emulated.degrees("head", "neck", "yaw") == pytest.approx(20.0, abs=1e-4)
    assert emulated.degrees("l_arm", "elbow", "yaw") == pytest.approx(-35.0, abs=1e-4)
    assert emulated.degrees("r_hand", "gripper") == pytest.approx(40.0, abs=1e-4)
    assert emulated.degrees("head", "r_antenna") == pytest.approx(15.0, abs=1e-4)
    vx, vy, vtheta = emulated.directions[-1]
    assert (vx, vy) == pytest.approx((0.3, -0.1)) and vtheta == pytest.approx(math.radians(45))
    after = robot.get_observation()["observation.state"]
    np.testing.assert_allclose(after, action, atol=1e-4)  # odometry: the commanded velocity


def test_the_guard_holds_a_nan_or_far_action_and_stops_the_base(robot, server):
    emulated = server.robot
    safe = robot.get_observation()["observation.state"].copy()
    safe[0] = 10.0
    safe[-3:] = [0.2, 0.0, 0.0]
    robot.send_action(safe)
    for bad_index, bad_value in ((1, np.nan), (4, 5000.0), (len(ALL) - 3, 50.0)):
        bad = safe.copy()
        bad[0] = 60.0
        bad[bad_index] = bad_value
        sent = robot.send_action(bad)
        np.testing.assert_allclose(sent[:-3], safe[:-3], atol=1e-5)  # the joints held
        assert list(sent[-3:]) == [0.0, 0.0, 0.0]
        assert emulated.directions[-1] == (0.0, 0.0, 0.0)  # the base stopped
        assert emulated.degrees("head", "neck", "yaw") == pytest.approx(10.0, abs=1e-4)
    # A small overshoot is clipped to the SDK's cap, not held.
    fast = safe.copy()
    fast[-3] = 0.65
    assert robot.send_action(fast)[-3] == pytest.approx(0.61)
    with pytest.raises(InvalidInput, match="values"):
        robot.send_action(np.zeros(3))


def test_max_relative_target_caps_each_step_from_the_present_position(server):
    robot = Reachy2Robot(config(server, max_relative_target=5.0))
    robot.connect()
    try:
        start = robot.get_observation()["observation.state"].copy()
        goal = start.copy()
        goal[0] = start[0] + 30.0
        sent = robot.send_action(goal)
        assert sent[0] == pytest.approx(start[0] + 5.0, abs=1e-4)
        assert server.robot.degrees("head", "neck", "yaw") == pytest.approx(
            start[0] + 5.0, abs=1e-3
        )
    finally:
        robot.disconnect()


def test_external_commands_are_recorded_but_never_sent(server):
    robot = Reachy2Robot(config(server, use_external_commands=True))
    robot.connect()
    try:
        action = robot.get_observation()["observation.state"].copy()
        action[0] = 25.0
        assert robot.send_action(action)[0] == 25.0
        assert "SendComponentsCommands" not in server.robot.calls
        assert "SendDirection" not in server.robot.calls
    finally:
        robot.disconnect()
    assert "SendDirection" not in server.robot.calls


@pytest.mark.parametrize("host", ["127.0.0.1", "reachy.invalid"])
def test_no_server_or_a_wrong_host_is_one_error_naming_the_host_with_a_hint(host):
    robot = Reachy2Robot(config(None, connect_timeout_s=0.5, ip_address=host))
    with pytest.raises(HardwareError) as caught:
        robot.connect()
    error = caught.value
    assert f"{host}:{robot.config.sdk_port}" in error.message
    assert "no Reachy 2 SDK server answering" in error.message
    assert "sdk_port" in (error.hint or "")
    assert not robot.is_connected


def test_a_missing_part_is_named_with_the_flag_that_leaves_it_out():
    with ReachyServer(EmulatedReachy(missing=("mobile_base",))) as server:
        robot = Reachy2Robot(config(server))
        with pytest.raises(HardwareError, match=r"has no mobile base") as caught:
            robot.connect()
        assert "with_mobile_base=false" in (caught.value.hint or "")
        assert f"127.0.0.1:{server.port}" in caught.value.message
        # Without it, the rest works.
        robot = Reachy2Robot(config(server, with_mobile_base=False))
        robot.connect()
        assert robot.get_observation()["observation.state"].shape == (len(ALL) - 3,)
        robot.disconnect()


def test_a_part_not_answering_at_connect_is_named():
    with ReachyServer(EmulatedReachy(silent=("l_arm",))) as server:
        robot = Reachy2Robot(config(server))
        with pytest.raises(HardwareError, match=r"left arm does not answer") as caught:
            robot.connect()
        assert f"127.0.0.1:{server.port}" in caught.value.message


def test_slow_replies_keep_the_last_reading_then_name_the_part(server):
    robot = Reachy2Robot(config(server, request_timeout_s=0.1, observation_timeout_s=0.4))
    robot.connect()
    try:
        before = robot.get_observation()["observation.state"]
        server.robot.delay_s = 0.3
        np.testing.assert_array_equal(robot.get_observation()["observation.state"], before)
        time.sleep(0.3)
        with pytest.raises(
            HardwareError,
            match=r"no reading of the Reachy 2 for .*robot state \(GetReachyState\) does not "
            r"answer: no answer in time \(DEADLINE_EXCEEDED\)",
        ):
            robot.get_observation()
    finally:
        server.robot.delay_s = 0.0
        robot.disconnect()


def test_the_server_dying_is_one_error_naming_the_host(server):
    robot = Reachy2Robot(config(server, request_timeout_s=0.2, observation_timeout_s=0.3))
    robot.connect()
    action = robot.get_observation()["observation.state"]
    server.stop()
    deadline = time.monotonic() + 10
    with pytest.raises(HardwareError) as caught:
        while time.monotonic() < deadline:
            robot.get_observation()
            robot.send_action(action)
            time.sleep(0.05)
    message = caught.value.message
    assert f"the Reachy 2 SDK server at 127.0.0.1:{server.port} does not answer" in message
    robot.disconnect()  # says it could not stop the base, does not raise


def test_the_robots_cameras_give_rgb_frames_of_the_asked_size(server):
    robot = Reachy2Robot(
        config(
            server,
            with_left_teleop_camera=True,
            with_right_teleop_camera=True,
            camera_width=320,
            camera_height=240,
        )
    )
    assert robot.observation_features["observation.images.teleop_left"].shape == (240, 320, 3)
    robot.connect()
    try:
        observation = robot.get_observation()
        left = observation["observation.images.teleop_left"]
        right = observation["observation.images.teleop_right"]
        assert left.shape == (240, 320, 3) and left.dtype == np.uint8
        # The emulator paints the left view blue and the right one green (BGR channels 0, 1).
        assert left[200, 300, 2] > 150 and left[200, 300, 0] < 50
        assert right[200, 300, 1] > 150 and right[200, 300, 2] < 50
    finally:
        robot.disconnect()


def test_a_camera_the_robot_lacks_is_named():
    with ReachyServer(EmulatedReachy(missing=("depth_camera",))) as server:
        camera = converter.structure(
            {
                "type": "reachy2_camera",
                "name": "depth",
                "image_type": "rgb",
                "ip_address": "127.0.0.1",
                "port": server.port,
            },
            CameraConfig,
        ).build()
        with pytest.raises(HardwareError, match=r"has no depth camera \(depth_camera"):
            camera.connect()


def teleop(server: ReachyServer, **settings) -> Reachy2Teleoperator:
    raw = {"type": "reachy2_teleoperator", "ip_address": "127.0.0.1", "sdk_port": server.port}
    made = converter.structure({**raw, **settings}, TeleoperatorConfig)
    return made.build(None)  # type: ignore[arg-type]


def test_the_teleoperator_reads_the_robots_goals_and_last_velocity(robot, server):
    action = robot.get_observation()["observation.state"].copy()
    action[ALL.index("r_shoulder_roll.pos")] = -12.5
    action[-3:] = [0.1, 0.05, -20.0]
    robot.send_action(action)
    leader = teleop(server)
    assert leader.action_features["action"].names == ALL
    leader.connect()
    try:
        np.testing.assert_allclose(leader.get_action({}), action, atol=1e-4)
    finally:
        leader.disconnect()
    present = teleop(server, use_present_position=True, with_mobile_base=False, with_neck=False)
    present.connect()
    try:
        got = present.get_action({})
        names = present.action_features["action"].names
        assert names == [*arm("l"), *arm("r"), "l_antenna.pos", "r_antenna.pos"]
        np.testing.assert_allclose(got, [action[ALL.index(n)] for n in names], atol=1e-4)
    finally:
        present.disconnect()


def test_the_teleoperator_names_the_host_when_the_robot_is_gone():
    port = free_port()
    leader = converter.structure(
        {
            "type": "reachy2_teleoperator",
            "ip_address": "127.0.0.1",
            "sdk_port": port,
            "request_timeout_s": 0.2,
        },
        TeleoperatorConfig,
    ).build(None)  # type: ignore[arg-type]
    with pytest.raises(HardwareError, match=f"127.0.0.1:{port}"):
        leader.connect()


LEROBOT_READS = """
import json, sys
from reachy2_sdk import ReachySDK
from lerobot.robots.reachy2 import Reachy2Robot, Reachy2RobotConfig
port = int(sys.argv[1])
# LeRobot 0.6.1 builds ReachySDK(ip_address) with the SDK's default ports (fake_only, sdk_port,
# audio_port, video_port): point them at the emulator.
ReachySDK.__init__.__defaults__ = (False, port, port, port)
robot = Reachy2Robot(Reachy2RobotConfig(ip_address="127.0.0.1"))
robot.connect()
observation = {k: float(v) for k, v in robot.get_observation().items()}
action = dict(observation)
action.update(json.loads(sys.argv[2]))
robot.send_action(action)
robot.disconnect()
# Its camera, read as its robot would once a frame is there (`read`, then `read_latest`).
import numpy as np
from lerobot.cameras.reachy2_camera import Reachy2Camera, Reachy2CameraConfig
camera = Reachy2Camera(Reachy2CameraConfig(name="teleop", image_type="right",
                                          ip_address="127.0.0.1", port=port, width=320, height=240))
camera.connect()
camera.read()
np.save(sys.argv[3], camera.read_latest())
camera.disconnect()
features, actions = list(robot.observation_features), list(robot.action_features)
print(json.dumps({"observation": observation, "action": action,
                  "features": features, "actions": actions}))
"""
CHANGES = {
    "neck_yaw.pos": 12.0,
    "l_elbow_pitch.pos": -30.0,
    "r_gripper.pos": 25.0,
    "r_antenna.pos": 8.0,
    "mobile_base.vx": 0.2,
    "mobile_base.vtheta": 30.0,
}


@pytest.mark.lerobot
@pytest.mark.slow
def test_lerobots_reachy2_reads_and_commands_the_same_emulated_robot(lerobot, tmp_path):
    """LeRobot's own `Reachy2Robot` through Pollen's `reachy2_sdk` (importable by LeRobot's
    Python, or put on its path with RLCTL_REACHY2_SDK_PATH: `pip install --target DIR
    reachy2_sdk==1.0.15` with its pins) and rlctl read the same observation from the same
    emulated server, and the same action puts the same goals on its joints."""
    extra = os.environ.get("RLCTL_REACHY2_SDK_PATH")
    env = dict(os.environ, PYTHONPATH=extra) if extra else None
    python = os.environ["RLCTL_LEROBOT_PYTHON"]
    probe = subprocess.run(
        [python, "-c", "import reachy2_sdk"], env=env, capture_output=True, timeout=60, check=False
    )
    if probe.returncode != 0:
        pytest.skip("reachy2_sdk is not importable by LeRobot's Python: set RLCTL_REACHY2_SDK_PATH")
    with ReachyServer() as theirs_server:
        frame_file = tmp_path / "right.npy"
        theirs = lerobot(
            "-c",
            LEROBOT_READS,
            theirs_server.port,
            json.dumps(CHANGES),
            frame_file,
            timeout=120,
            env=env,
        )
        their_goals = theirs_server.robot.commands[-1]
        their_direction = theirs_server.robot.directions[-1]
    assert theirs["features"] == ALL and theirs["actions"] == ALL
    with ReachyServer() as server:
        robot = Reachy2Robot(config(server))
        assert robot.action_features["action"].names == theirs["actions"]
        robot.connect()
        try:
            ours = robot.get_observation()["observation.state"]
            expected = [theirs["observation"][name] for name in ALL]
            np.testing.assert_allclose(ours, expected, atol=1e-4)
            robot.send_action(np.asarray([theirs["action"][name] for name in ALL], np.float32))
        finally:
            robot.disconnect()
        our_goals = server.robot.commands[-1]
        our_direction = server.robot.directions[-2]  # before the stop at disconnect
    assert set(our_goals) == set(their_goals)
    for joint, value in their_goals.items():
        assert our_goals[joint] == pytest.approx(value, abs=1e-5), joint
    assert our_direction == pytest.approx(their_direction, abs=1e-6)
    # The same frame: decoded, resized with area interpolation, RGB (their OpenCV build may
    # round a level apart).
    their_frame = np.load(frame_file)
    with ReachyServer() as server:
        camera = converter.structure(
            {
                "type": "reachy2_camera",
                "name": "teleop",
                "image_type": "right",
                "ip_address": "127.0.0.1",
                "port": server.port,
                "width": 320,
                "height": 240,
            },
            CameraConfig,
        ).build()
        camera.connect()
        try:
            our_frame = camera.read()
        finally:
            camera.disconnect()
    assert their_frame.shape == our_frame.shape == (240, 320, 3)
    assert np.abs(their_frame.astype(int) - our_frame.astype(int)).max() <= 1


GARBAGE = [
    ("nan", lambda mid: np.where(np.arange(mid.size) == 3, np.nan, mid)),
    ("all nan", lambda mid: np.full(mid.size, np.nan)),
    ("+inf", lambda mid: np.where(np.arange(mid.size) == 0, np.inf, mid)),
    ("-inf base", lambda mid: np.where(np.arange(mid.size) == mid.size - 1, -np.inf, mid)),
    ("huge", lambda mid: np.full(mid.size, 1e30)),
    ("float32 max", lambda mid: np.full(mid.size, 3e38)),
    ("far below", lambda mid: mid - 1e4),
]


def within_limits(server: ReachyServer) -> None:
    emulated = server.robot
    with emulated.lock:
        goals = dict(emulated.goals)
        directions = list(emulated.directions)
    for joint, radians in goals.items():
        assert math.isfinite(radians) and abs(math.degrees(radians)) <= 180.0 + 1e-3, joint
    for vx, vy, vtheta in directions:
        assert abs(vx) <= 0.61 + 1e-6 and abs(vy) <= 0.61 + 1e-6
        assert abs(math.degrees(vtheta)) <= 114.0 + 1e-3


def test_no_garbage_or_random_action_moves_a_joint_or_the_base_past_its_range(robot, server):
    mid = robot.get_observation()["observation.state"].astype(np.float64)
    for _, make in GARBAGE:
        robot.send_action(make(mid))
        within_limits(server)
    rng = np.random.default_rng(0)
    for _ in range(40):
        wild = rng.normal(0, 150, mid.size)
        wild[rng.random(mid.size) < 0.05] = np.nan
        robot.send_action(wild.astype(np.float32))
        within_limits(server)


def test_a_server_sending_non_finite_positions_is_held_then_named(server):
    robot = Reachy2Robot(config(server, observation_timeout_s=0.3))
    robot.connect()
    try:
        before = robot.get_observation()["observation.state"]
        with server.robot.lock:
            server.robot.joints[("r_arm", "elbow", "pitch")] = float("nan")
            server.robot.joints[("head", "l_antenna", "")] = 1e38  # past float32 in degrees
        np.testing.assert_array_equal(robot.get_observation()["observation.state"], before)
        time.sleep(0.35)
        with pytest.raises(HardwareError, match=r"r_elbow_pitch.pos, l_antenna.pos") as caught:
            robot.get_observation()
        assert "no finite value" in caught.value.message
    finally:
        robot.disconnect()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"GIF89a....", "not a JPEG or PNG"),
        # A JPEG header claiming 60000x60000 pixels: refused before it is decoded.
        (b"\xff\xd8\xff\xc0\x00\x11\x08\xea\x60\xea\x60\x03" + bytes(20), "60000x60000"),
    ],
)
def test_a_camera_sending_no_picture_is_one_error_naming_it(server, data, why):
    server.robot.frame_data = data
    camera = converter.structure(
        {
            "type": "reachy2_camera",
            "name": "teleop",
            "image_type": "left",
            "ip_address": "127.0.0.1",
            "port": server.port,
        },
        CameraConfig,
    ).build()
    with pytest.raises(HardwareError, match=why) as caught:
        camera.connect()
    assert f"reachy2_camera teleop left at 127.0.0.1:{server.port}" in str(caught.value)
    assert not camera.is_connected


def test_disable_torque_on_disconnect_lowers_the_arms_torque_then_turns_all_off(
    server, monkeypatch
):
    from rlctl.adapters.robots import reachy2_link

    monkeypatch.setattr(reachy2_link, "SMOOTH_OFF_STEP_S", 0.01)
    robot = Reachy2Robot(config(server, disable_torque_on_disconnect=True))
    robot.connect()
    robot.disconnect()
    calls = server.robot.calls
    torques = [c for c in calls if c.startswith("SetTorqueLimit l_arm")]
    assert torques[-5:] == [f"SetTorqueLimit l_arm {t}" for t in (50, 35, 20, 5, 100)]
    assert calls.index("SetTorqueLimit l_arm 5") < calls.index("TurnOff l_arm")
    assert not any(server.robot.on.values())
    assert server.robot.directions[-1] == (0.0, 0.0, 0.0)  # the base stopped first


def test_a_part_that_stops_answering_mid_run_is_named_with_the_host(server):
    robot = Reachy2Robot(config(server, observation_timeout_s=0.3))
    robot.connect()
    leader = teleop(server)
    leader.connect()
    try:
        robot.get_observation()
        server.robot.silent.add("r_hand")
        robot.get_observation()  # the last reading, said once
        with pytest.raises(HardwareError, match=r"right gripper does not answer") as caught:
            leader.get_action({})
        assert f"127.0.0.1:{server.port}" in caught.value.message
        time.sleep(0.35)
        with pytest.raises(HardwareError, match=r"right gripper does not answer") as caught:
            robot.get_observation()
        assert f"the Reachy 2 at 127.0.0.1:{server.port}" in caught.value.message
    finally:
        leader.disconnect()
        robot.disconnect()
