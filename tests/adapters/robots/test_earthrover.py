"""`earthrover_mini_plus` against an emulated FrodoBots SDK server (a real HTTP server in a
thread, `earthrover_sdk.py`): LeRobot 0.6.1's features, the observation as LeRobot builds it,
every command through the guard, the rover stopped on a stale command and on disconnect, and
the faults (no server at connect, a late answer, a corrupt frame, non-finite telemetry, the
server gone mid-run). LeRobot's own `EarthRoverMiniPlus` reads the same emulator (opt-in)."""

from __future__ import annotations

import base64
import time

import cv2
import numpy as np
import pytest
import structlog

from rlctl.adapters.cameras.picture_header import picture_size
from rlctl.adapters.robots.config import EarthRoverMiniPlusConfig, RobotConfig
from rlctl.adapters.robots.earthrover import (
    ACTION_NAMES,
    STATE_NAMES,
    EarthRoverMiniPlus,
    decode_frame,
    earthrover_mini_plus,
)
from rlctl.domain.config import converter, structure
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput

from .earthrover_sdk import TELEMETRY, FakeEarthRoverSdk, jpeg, picture

pytestmark = pytest.mark.timeout(60)

# LeRobot 0.6.1's `observation_features` floats, in its order.
LEROBOT_STATE = [
    "speed",
    "battery_level",
    "orientation",
    "gps_latitude",
    "gps_longitude",
    "gps_signal",
    "signal_level",
    "vibration",
    "lamp",
    "accelerometer_x",
    "accelerometer_y",
    "accelerometer_z",
    "gyroscope_x",
    "gyroscope_y",
    "gyroscope_z",
    "magnetometer_filtered_x",
    "magnetometer_filtered_y",
    "magnetometer_filtered_z",
    "wheel_rpm_0",
    "wheel_rpm_1",
    "wheel_rpm_2",
    "wheel_rpm_3",
]


@pytest.fixture
def sdk():
    server = FakeEarthRoverSdk().start()
    yield server
    server.stop()


def rover(sdk: FakeEarthRoverSdk, **settings) -> EarthRoverMiniPlus:
    config = converter.structure(
        {"type": "earthrover_mini_plus", "sdk_url": sdk.url, **settings}, RobotConfig
    )
    return earthrover_mini_plus(config)


def wait_for(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def expected_frame(sdk: FakeEarthRoverSdk, camera: str) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(sdk.frames[camera], np.uint8), cv2.IMREAD_COLOR)
    return cv2.cvtColor(cv2.resize(image, (640, 480)), cv2.COLOR_BGR2RGB)


def test_features_are_lerobots():
    robot = earthrover_mini_plus(EarthRoverMiniPlusConfig())
    assert robot.robot_type == "earthrover_mini_plus"
    features = robot.observation_features
    assert list(features) == [
        "observation.state",
        "observation.images.front",
        "observation.images.rear",
    ]
    state = features["observation.state"]
    assert (state.dtype, state.shape, state.names) == ("float32", (22,), LEROBOT_STATE)
    for camera in ("front", "rear"):
        image = features[f"observation.images.{camera}"]
        assert (image.dtype, image.shape) == ("video", (480, 640, 3))
        assert image.names == ["height", "width", "channels"]
    action = robot.action_features["action"]
    assert (action.dtype, action.shape, action.names) == (
        "float32",
        (2,),
        ["linear_velocity", "angular_velocity"],
    )


def test_the_observation_is_the_sdks_telemetry_and_frames_as_lerobot_reads_them(sdk, monkeypatch):
    # A proxy meant for the internet does not carry the SDK's requests.
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    robot = rover(sdk)
    robot.connect()
    try:
        observation = robot.get_observation()
    finally:
        robot.disconnect()
    state = observation["observation.state"]
    assert state.dtype == np.float32 and state.shape == (22,)
    got = dict(zip(STATE_NAMES, state.tolist(), strict=True))
    assert got["battery_level"] == 87 and got["orientation"] == 128
    assert got["gps_latitude"] == pytest.approx(22.753256)
    assert got["gps_longitude"] == pytest.approx(114.089163)
    # The sensor arrays' newest entry (not the first).
    assert got["accelerometer_z"] == pytest.approx(TELEMETRY["accels"][-1][2])
    assert got["magnetometer_filtered_x"] == pytest.approx(-31.5)
    for camera in ("front", "rear"):
        frame = observation[f"observation.images.{camera}"]
        assert frame.dtype == np.uint8 and frame.shape == (480, 640, 3)
        # Resized (the rear camera sends 320x240) and turned from BGR to RGB, as LeRobot does.
        np.testing.assert_array_equal(frame, expected_frame(sdk, camera))
    # The picture's corner is blue in BGR terms: red channel 220 after the turn to RGB.
    assert observation["observation.images.front"][10, 10, 0] == 220


def test_commands_pass_the_guard_and_a_refused_one_stops_the_rover(sdk):
    robot = rover(sdk, max_linear_velocity=0.5, command_timeout_s=0)
    robot.connect()
    try:
        assert sdk.last_command() == (0.0, 0.0)  # connecting starts it still
        sent = robot.send_action(np.array([0.4, -0.3]))
        assert sent.dtype == np.float32 and sent == pytest.approx([0.4, -0.3])
        assert sdk.last_command() == pytest.approx((0.4, -0.3))
        # A small overshoot is clipped to the limit.
        assert robot.send_action(np.array([0.55, 1.05])) == pytest.approx([0.5, 1.0])
        assert sdk.last_command() == pytest.approx((0.5, 1.0))
        # Non-finite, or far outside: the rover stops (holding a velocity would keep it going).
        for bad in ([np.nan, 0.1], [0.1, np.inf], [0.2, 3e38], [-5.0, 0.0]):
            robot.send_action(np.array([0.3, 0.3]))
            assert robot.send_action(np.array(bad)).tolist() == [0.0, 0.0]
            assert sdk.last_command() == (0.0, 0.0), bad
        with pytest.raises(InvalidInput, match="2 values"):
            robot.send_action(np.zeros(3))
        # Telemetry follows the rover: it drives as it is told.
        robot.send_action(np.array([0.5, 0.0]))
        state = robot.get_observation()["observation.state"]
        assert state[STATE_NAMES.index("speed")] == pytest.approx(1.5)
        assert state[STATE_NAMES.index("wheel_rpm_0")] == pytest.approx(50.0)
    finally:
        robot.disconnect()
    assert sdk.last_command() == (0.0, 0.0)


def test_a_stale_command_and_disconnecting_stop_the_rover(sdk):
    # A timeout a loaded machine's scheduler cannot reach between two commands by accident.
    robot = rover(sdk, command_timeout_s=0.8)
    robot.connect()
    try:
        robot.send_action(np.array([0.8, 0.1]))
        assert sdk.last_command() == pytest.approx((0.8, 0.1))
        # Commands keep coming: no stop.
        for _ in range(5):
            time.sleep(0.02)
            sent_at = time.monotonic()  # the watchdog counts from before the request
            robot.send_action(np.array([0.8, 0.1]))
        assert robot.watchdog_stops == 0
        # The loop stalls: stopped a little after the timeout.
        assert wait_for(lambda: sdk.last_command() == (0.0, 0.0), 5)
        assert time.monotonic() - sent_at >= 0.8
        # The watchdog counts its stop once the SDK took it: a moment after the SDK saw it.
        assert wait_for(lambda: robot.watchdog_stops == 1, 5)
        count = len(sdk.commands)
        time.sleep(0.3)
        assert len(sdk.commands) == count  # stopped once, not every tick of the watchdog
        robot.send_action(np.array([0.6, 0.0]))
        assert sdk.last_command() == pytest.approx((0.6, 0.0))
    finally:
        robot.disconnect()
    assert sdk.last_command() == (0.0, 0.0)
    robot.disconnect()  # safe twice
    assert not robot.is_connected
    with pytest.raises(HardwareError, match="not connected"):
        robot.send_action(np.zeros(2))


def test_no_sdk_at_connect_is_one_error_naming_the_address_and_the_fix():
    server = FakeEarthRoverSdk()
    url = server.url
    server.stop()  # a port nothing listens on
    robot = earthrover_mini_plus(EarthRoverMiniPlusConfig(sdk_url=url, connect_timeout_s=0.3))
    started = time.monotonic()
    with pytest.raises(HardwareError) as caught:
        robot.connect()
    assert time.monotonic() - started < 5
    error = caught.value
    assert f"no answer from the FrodoBots SDK at {url}" in error.message
    assert "connection refused" in error.message
    assert "hypercorn main:app" in (error.hint or "") and "robot.sdk_url" in (error.hint or "")
    assert not robot.is_connected


def test_a_camera_that_never_sends_a_picture_is_named_at_connect(sdk):
    sdk.corrupt_frames("rear", times=10_000)
    robot = rover(sdk, connect_timeout_s=0.3)
    with pytest.raises(HardwareError, match=r"no usable rear camera \(/v2/rear\)"):
        robot.connect()


def test_a_late_answer_a_corrupt_frame_and_nan_telemetry_keep_the_last_good_reading(sdk):
    robot = rover(sdk, request_timeout_s=0.2, observation_timeout_s=2.0, command_timeout_s=0)
    robot.connect()
    try:
        first = robot.get_observation()
        # A frame that is no picture: the last one stands.
        sdk.corrupt_frames("front")
        with structlog.testing.capture_logs() as logs:
            second = robot.get_observation()
        np.testing.assert_array_equal(
            second["observation.images.front"], first["observation.images.front"]
        )
        assert any("front camera: keeping the last reading" in e["event"] for e in logs)
        assert "not a JPEG or PNG" in next(e["reason"] for e in logs if "front" in e["event"])
        # A request that times out mid-episode: the last telemetry stands, the call is bounded.
        sdk.delay("/data", 1.0)
        started = time.monotonic()
        with structlog.testing.capture_logs() as logs:
            third = robot.get_observation()
        assert time.monotonic() - started < 0.9
        np.testing.assert_array_equal(third["observation.state"], first["observation.state"])
        assert any(e.get("reason") == "no answer in time" for e in logs)
        # Non-finite (or missing) telemetry: those fields keep their last finite values.
        sdk.forced.update(battery=float("nan"), latitude=1e300, accels=[[1, "x"]], speed=10**400)
        with structlog.testing.capture_logs() as logs:
            fourth = robot.get_observation()["observation.state"]
        assert np.all(np.isfinite(fourth))
        for name in (
            "battery_level",
            "gps_latitude",
            "accelerometer_y",
            "accelerometer_z",
            "speed",
        ):
            i = STATE_NAMES.index(name)
            assert fourth[i] == first["observation.state"][i], name
        assert fourth[STATE_NAMES.index("accelerometer_x")] == 1.0  # the finite one is taken
        warned = next(e for e in logs if "not finite" in e["event"])
        assert warned["fields"] == [
            "accelerometer_y",
            "accelerometer_z",
            "battery_level",
            "gps_latitude",
            "speed",
        ]
        with structlog.testing.capture_logs() as logs:
            robot.get_observation()
        assert not logs  # said once per episode
    finally:
        robot.disconnect()


def test_answers_that_are_no_sdks_keep_the_last_reading(sdk):
    robot = rover(sdk, command_timeout_s=0)
    robot.connect()
    try:
        first = robot.get_observation()
        sdk.raw["/data"] += [b"[" * 200_000, b"[1, 2]", b"{not json", b"\xff\xfe"]
        sdk.raw["/v2/rear"] += [b'{"rear_frame": 12}', b'{"front_frame": "abc"}']
        with structlog.testing.capture_logs() as logs:
            for _ in range(4):
                later = robot.get_observation()
                np.testing.assert_array_equal(
                    later["observation.state"], first["observation.state"]
                )
                np.testing.assert_array_equal(
                    later["observation.images.rear"], first["observation.images.rear"]
                )
        said = {e["event"]: e["reason"] for e in logs}
        assert "not JSON" in said["telemetry: keeping the last reading"]
        assert "no frame in the answer" in said["rear camera: keeping the last reading"]
    finally:
        robot.disconnect()


def test_the_sdk_gone_mid_episode_is_one_error_naming_the_part(sdk):
    # 1 s without a usable reading: a loaded CI host once served fewer than two observations
    # from the last readings within 0.4 s.
    robot = rover(sdk, request_timeout_s=0.2, observation_timeout_s=1.0, command_timeout_s=0)
    robot.connect()
    robot.get_observation()
    sdk.stop()
    started = time.monotonic()
    served = 0  # observations served from the last readings before it gives up
    with pytest.raises(HardwareError) as caught:
        while time.monotonic() - started < 5:
            robot.get_observation()
            served += 1
            time.sleep(0.05)
    assert served >= 2 and time.monotonic() - started < 4
    error = caught.value
    assert "no usable front camera from the SDK (/v2/front)" in error.message
    assert "connection refused" in error.message
    assert error.where == f"earthrover_mini_plus {sdk.url}"
    robot.disconnect()  # the stop cannot get through: said, not raised
    assert not robot.is_connected


def test_commands_that_never_get_through_are_a_lost_robot(sdk):
    robot = rover(sdk, request_timeout_s=0.2, observation_timeout_s=0.3, command_timeout_s=0)
    robot.connect()
    sdk.stop()
    with (
        structlog.testing.capture_logs() as logs,
        pytest.raises(HardwareError, match=r"no command taken by the SDK \(/control\)"),
    ):
        for _ in range(40):
            robot.send_action(np.array([0.1, 0.0]))
            time.sleep(0.03)
    # Said once at most, never once a tick, before the error (a loaded machine may reach the
    # error with the first command that fails).
    assert [e["event"] for e in logs].count("a command did not get through") <= 1
    robot.disconnect()


def test_pictures_are_checked_before_they_are_decoded():
    small = jpeg(picture(64, 48, seed=3))
    assert picture_size(small) == (64, 48)
    _, png = cv2.imencode(".png", picture(30, 20, seed=1))
    assert picture_size(png.tobytes()) == (30, 20)
    assert decode_frame(base64.b64encode(small).decode()).shape == (480, 640, 3)
    # A header claiming 60000x60000 pixels in a tiny file is refused without decoding it.
    huge = bytearray(small)
    sof = next(i for i in range(len(huge)) if huge[i] == 0xFF and huge[i + 1] == 0xC0)
    huge[sof + 5 : sof + 9] = (60000).to_bytes(2, "big") * 2
    for bad, why in (
        (base64.b64encode(bytes(huge)).decode(), "60000x60000"),
        ("", "no frame"),
        (None, "no frame"),
        (base64.b64encode(b"GIF89a....").decode(), "not a JPEG or PNG"),
        (base64.b64encode(small[: sof + 20]).decode(), "does not decode"),
    ):
        with pytest.raises(ValueError, match=why):
            decode_frame(bad)


@pytest.mark.parametrize(
    ("setting", "where"),
    [
        ({"sdk_url": "localhost:8000"}, "robot.sdk_url"),
        ({"sdk_url": "ftp://x"}, "robot.sdk_url"),
        ({"max_linear_velocity": 0}, "robot.max_linear_velocity"),
        ({"max_angular_velocity": 1.5}, "robot.max_angular_velocity"),
        ({"max_angular_velocity": float("nan")}, "robot.max_angular_velocity"),
        ({"request_timeout_s": 0}, "robot.request_timeout_s"),
        ({"observation_timeout_s": float("inf")}, "robot.observation_timeout_s"),
        ({"command_timeout_s": -1}, "robot.command_timeout_s"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(setting, where):
    with pytest.raises(ConfigError) as caught:
        structure({"type": "earthrover_mini_plus", **setting}, RobotConfig)
    assert caught.value.where == where


LEROBOT_READS = """
import base64, json, sys
import numpy as np
from lerobot.robots.earthrover_mini_plus import EarthRoverMiniPlus, EarthRoverMiniPlusConfig
from lerobot.utils.feature_utils import hw_to_dataset_features
robot = EarthRoverMiniPlus(EarthRoverMiniPlusConfig())
# LeRobot 0.6.1 hard-codes http://localhost:8000 and ignores sdk_url: point it at the emulator.
robot.sdk_base_url = sys.argv[1]
robot.connect()
observation = robot.get_observation()
sent = robot.send_action({"linear_velocity": 0.25, "angular_velocity": -0.5})
robot.disconnect()
frames = {k: observation.pop(k) for k in ("front", "rear")}
for name, frame in frames.items():
    np.save(f"{sys.argv[2]}/{name}.npy", frame)
dataset = {
    **hw_to_dataset_features(robot.observation_features, "observation"),
    **hw_to_dataset_features(robot.action_features, "action"),
}
dataset = {k: [v["dtype"], list(v["shape"]), v["names"]] for k, v in dataset.items()}
print(json.dumps({"observation": observation, "sent": sent, "dataset": dataset,
                  "features": {k: str(v) for k, v in robot.observation_features.items()},
                  "actions": list(robot.action_features)}))
"""


@pytest.mark.lerobot
def test_lerobots_earthrover_reads_the_same_observation_from_the_same_sdk(sdk, lerobot, tmp_path):
    theirs = lerobot("-c", LEROBOT_READS, sdk.url, str(tmp_path), timeout=120)
    # Their command got through, and their disconnect stopped the rover, as ours does.
    linear_angular = [c[1:3] for c in sdk.commands]
    assert (0.25, -0.5) in linear_angular and linear_angular[-1] == (0.0, 0.0)
    assert list(theirs["features"]) == ["front", "rear", *LEROBOT_STATE]
    assert theirs["actions"] == list(ACTION_NAMES)
    robot = rover(sdk)
    # The dataset features LeRobot's recorder makes of its robot are ours.
    features = {**robot.observation_features, **robot.action_features}
    assert {k: [f.dtype, list(f.shape), f.names] for k, f in features.items()} == theirs["dataset"]
    robot.connect()
    try:
        ours = robot.get_observation()
    finally:
        robot.disconnect()
    expected = np.asarray([theirs["observation"][name] for name in LEROBOT_STATE], np.float32)
    # Same fields, same order; the wheels follow the last command, which is a stop for both.
    np.testing.assert_array_equal(ours["observation.state"], expected)
    for camera in ("front", "rear"):
        frame = np.load(tmp_path / f"{camera}.npy")
        assert frame.dtype == np.uint8 and frame.shape == (480, 640, 3)
        mine = ours[f"observation.images.{camera}"].astype(int)
        # Same decode, resize and colour order (their OpenCV build may round a level apart).
        assert np.abs(mine - frame.astype(int)).max() <= 1, camera
