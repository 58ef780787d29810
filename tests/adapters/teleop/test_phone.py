"""The Android phone: the `teleop` package's server in process, driven by a fake phone that sends
what its WebXR page sends over the websocket; LeRobot's phone action and the joint goals."""

from __future__ import annotations

import json
import math
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websocket  # websocket-client, a dependency of the `teleop` package
from scipy.spatial.transform import Rotation

from rlctl.adapters.kinematics.robot_kinematics import RobotKinematics
from rlctl.adapters.teleop.config import PhoneConfig, TeleoperatorConfig
from rlctl.adapters.teleop.phone import AndroidPhone, PhoneTeleop
from rlctl.domain.config import structure
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput, NotSupported

from .conftest import MOTORS

pytestmark = pytest.mark.timeout(60)


class FakePhone:
    """The WebXR page: `{"type": "pose", "data": state}` messages, state as index.html builds it
    (position and orientation of the viewer in WebXR's frame: x right, y up, z back)."""

    def __init__(self, phone: AndroidPhone) -> None:
        self._phone = phone
        self.ws = websocket.create_connection(
            f"wss://127.0.0.1:{phone.port}/ws", sslopt={"cert_reqs": ssl.CERT_NONE}, timeout=5
        )
        self.position = np.zeros(3)
        self.yaw = 0.0  # about WebXR's y (up), radians
        self.sent = 0

    def send(self, *, move: bool, a: bool = False, b: bool = False, scale: float = 1.0) -> None:
        self.sent += 1
        half = self.yaw / 2
        state: dict[str, Any] = {
            "position": dict(zip("xyz", map(float, self.position), strict=True)),
            "orientation": {"x": 0.0, "y": math.sin(half), "z": 0.0, "w": math.cos(half)},
            "move": move,
            "gripper": "open",
            "fps": 60,
            "scale": scale,
            "reservedButtonA": a,
            "reservedButtonB": b,
            "device": "Phone",
            "message": f"frame {self.sent}",
        }
        self.ws.send(json.dumps({"type": "pose", "data": state}))
        deadline = time.monotonic() + 5
        while self._phone.latest_message.get("message") != state["message"]:
            assert time.monotonic() < deadline, "the server did not pass the pose on"
            time.sleep(0.002)

    def glide(self, *, up: float = 0.0, yaw: float = 0.0, steps: int = 10, **buttons: Any) -> None:
        """Move in small steps, as a hand does (the package drops jumps over 5 cm or 35°)."""
        for _ in range(steps):
            self.position[1] += up / steps
            self.yaw += yaw / steps
            self.send(move=True, **buttons)

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def android() -> Iterator[AndroidPhone]:
    phone = AndroidPhone(host="127.0.0.1", port=0)
    phone.start()
    yield phone
    phone.stop()


def test_the_page_is_served_over_https(android: AndroidPhone) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(
        f"https://127.0.0.1:{android.port}/", context=context, timeout=5
    ) as r:
        page = r.read().decode()
    assert "WebSocket" in page and "immersive-ar" in page


def test_starting_the_server_leaves_the_programs_logging_alone() -> None:
    """uvicorn's default configuration (logging.config.dictConfig) closes every handler of the
    process, and absl's closes the stream it holds: the phone must not reconfigure logging."""
    import logging

    closed: list[str] = []

    class Watched(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            pass

        def close(self) -> None:
            closed.append("closed")
            super().close()

    watched = Watched()
    root = logging.getLogger()
    root.addHandler(watched)
    package = logging.getLogger("teleop")
    before = list(package.handlers)
    phone = AndroidPhone(host="127.0.0.1", port=0)
    try:
        phone.start()
        phone.stop()
        phone.start()
    finally:
        phone.stop()
        root.removeHandler(watched)
    assert closed == []
    assert package.handlers == before


def test_the_phone_action_is_lerobots(android: AndroidPhone) -> None:
    fake = FakePhone(android)
    try:
        assert android.read() == {}  # nothing before a pose and the calibration
        fake.send(move=True)
        android.calibrate(timeout_s=5)
        action = android.read()
        assert sorted(action) == ["phone.enabled", "phone.pos", "phone.raw_inputs", "phone.rot"]
        assert action["phone.enabled"] is True
        np.testing.assert_allclose(action["phone.pos"], 0.0, atol=1e-9)
        assert action["phone.raw_inputs"] == {
            "move": True,
            "scale": 1.0,
            "reservedButtonA": False,
            "reservedButtonB": False,
        }
        # 10 cm up (WebXR +y is up: the robot's +z) and 20° to the left (about up).
        fake.glide(up=0.10, yaw=math.radians(20), a=True)
        action = android.read()
        # The camera, off the phone's centre, turned with it: LeRobot takes that off.
        turn = Rotation.from_rotvec([0, 0, math.radians(20)])
        offset = np.array([0.0, -0.02, 0.04])
        expected = np.array([0.0, 0.0, 0.10]) - (turn.apply(offset) - offset)
        np.testing.assert_allclose(action["phone.pos"], expected, atol=1e-6)
        np.testing.assert_allclose(
            action["phone.rot"].as_rotvec(), [0, 0, math.radians(20)], atol=1e-6
        )
        assert action["phone.raw_inputs"]["reservedButtonA"] is True
        # Released: not enabled; pressed again elsewhere: the position is captured again.
        fake.position[1] += 0.03
        fake.send(move=False)
        assert android.read()["phone.enabled"] is False
        fake.send(move=True)
        action = android.read()
        assert action["phone.enabled"] is True
        np.testing.assert_allclose(action["phone.pos"], 0.0, atol=1e-6)
    finally:
        fake.close()


def test_a_silent_phone_reads_as_released() -> None:
    now = [0.0]
    phone = AndroidPhone(host="127.0.0.1", port=0, message_timeout_s=0.5, clock=lambda: now[0])
    phone.start()
    fake = FakePhone(phone)
    try:
        fake.send(move=True)
        phone.calibrate(timeout_s=5)
        assert phone.read()["phone.enabled"] is True
        now[0] = 0.6
        assert phone.read()["phone.enabled"] is False
    finally:
        fake.close()
        phone.stop()


def test_no_touch_of_the_move_button_times_out(android: AndroidPhone) -> None:
    fake = FakePhone(android)
    try:
        fake.send(move=False)
        with pytest.raises(HardwareError, match="no touch of the move button") as error:
            android.calibrate(timeout_s=0.2)
        assert f":{android.port}" in str(error.value.hint)
    finally:
        fake.close()


def test_a_port_in_use_is_named(android: AndroidPhone) -> None:
    other = AndroidPhone(host="127.0.0.1", port=android.port)
    with pytest.raises(HardwareError, match="could not listen") as error:
        other.start()
    assert "--teleop.port" in str(error.value.hint)
    assert not other.is_connected


def _config(urdf: Path, **kw: Any) -> PhoneConfig:
    settings = {"type": "phone", "phone_os": "android", "urdf_path": str(urdf)}
    config = structure(settings | kw, TeleoperatorConfig)
    assert isinstance(config, PhoneConfig)
    return config


def test_the_phone_drives_joint_goals_through_inverse_kinematics(arm_urdf: Path) -> None:
    config = _config(arm_urdf, host="127.0.0.1", port=0, calibration_timeout_s=5)
    android = AndroidPhone(config.camera_offset, host="127.0.0.1", port=0)
    teleop = PhoneTeleop(config, phone=android)
    assert teleop.action_features["action"].names == [f"{m}.pos" for m in MOTORS]
    kin = RobotKinematics(arm_urdf, joint_names=list(MOTORS))
    q = np.array([0.0, -40, 70, -30, 0, 10], dtype=np.float32)
    start = kin.forward_kinematics(q)[:3, 3]
    android.start()
    fake = FakePhone(android)
    try:
        fake.send(move=True)
        teleop.connect()
        assert teleop.is_connected

        def tick() -> None:
            nonlocal q
            goal = teleop.get_action({"observation.state": q})
            assert goal.shape == (6,) and goal.dtype == np.float32
            q = goal  # the virtual arm reaches its goal

        tick()  # held at the calibration pose: LeRobot captures the reference here
        # 8 cm up at step size 0.5: the gripper frame 4 cm up; A held: the gripper opens.
        for _ in range(8):
            fake.glide(up=0.01, steps=1, a=True)
            tick()
        for _ in range(30):
            tick()
        np.testing.assert_allclose(
            kin.forward_kinematics(q)[:3, 3], start + np.array([0, 0, 0.04]), atol=2e-3
        )
        assert q[5] == 100.0
        # Released: the arm holds where it was sent, whatever the phone does.
        held = kin.forward_kinematics(q)[:3, 3]
        fake.position[1] -= 0.04
        fake.send(move=False, b=True)
        for _ in range(5):
            tick()
        np.testing.assert_allclose(kin.forward_kinematics(q)[:3, 3], held, atol=1e-3)
        assert q[5] == 0.0  # B closes it (the gripper still answers while released)
        with pytest.raises(InvalidInput, match="6 joints"):
            teleop.get_action({"observation.state": np.zeros(5)})
    finally:
        fake.close()
        teleop.disconnect()
    assert not teleop.is_connected


def test_ios_and_a_missing_urdf_are_refused_clearly(arm_urdf: Path) -> None:
    with pytest.raises(NotSupported, match="HEBI") as ios:
        structure({"type": "phone", "urdf_path": str(arm_urdf)}, TeleoperatorConfig).build(
            None  # type: ignore[arg-type]
        )
    assert "--teleop.phone_os=android" in str(ios.value.hint)
    with pytest.raises(ConfigError, match="URDF") as urdf:
        PhoneTeleop(structure({"type": "phone", "phone_os": "android"}, TeleoperatorConfig))  # type: ignore[arg-type]
    assert urdf.value.where == "teleop.urdf_path"
    with pytest.raises(ConfigError, match="end with the gripper"):
        _config(arm_urdf, motor_names=["shoulder_pan", "elbow_flex"])
