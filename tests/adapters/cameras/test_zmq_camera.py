"""The ZMQ camera against a local publisher process speaking LeRobot 0.6.1's image-server
messages: frames, a publisher that stops, nobody publishing, bad settings."""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import cv2
import numpy as np
import pytest
import zmq

from rlctl.adapters.cameras.config import CameraConfig, ZMQCameraConfig
from rlctl.adapters.cameras.zmq import ZMQCamera
from rlctl.domain.config import structure
from rlctl.domain.errors import ConfigError, HardwareError

pytestmark = pytest.mark.timeout(90)
PUBLISHER = Path(__file__).with_name("zmq_publisher.py")
# A publisher process just started can take seconds to reach a subscriber on a loaded machine
# (CI at its start): tests that expect frames wait that long for them.
PATIENT_MS = 20_000


# The running publisher processes by port, for a test that stops one.
_PUBLISHERS: dict[int, subprocess.Popen] = {}


@contextmanager
def publisher(
    name: str = "head", width: int = 64, height: int = 48, fps: int = 30, frames: int = -1
) -> Iterator[int]:
    process = subprocess.Popen(
        [sys.executable, str(PUBLISHER), name, str(width), str(height), str(fps), str(frames)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        _PUBLISHERS[port] = process
        yield port
    finally:
        process.kill()
        process.wait(timeout=10)


def zmq_camera(port: int, **settings) -> ZMQCamera:
    config = {"server_address": "127.0.0.1", "port": port, "camera_name": "head", "warmup_s": 0}
    return ZMQCamera(ZMQCameraConfig(**{**config, **settings}))


def test_frames_arrive_decoded_in_the_publishers_colour_order_and_size():
    with publisher() as port:
        camera = zmq_camera(port, timeout_ms=PATIENT_MS)
        camera.connect()
        try:
            assert (camera.height, camera.width) == (48, 64)  # learnt from the first frame
            frame = camera.read()
            assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8
            assert abs(int(frame[..., 0].mean()) - 200) < 6  # red first: RGB, as published
            assert abs(int(frame[..., 2].mean()) - 60) < 6
            # Each read is a new frame: consecutive frames' greens differ by 10 (JPEG keeps
            # a flat colour within a unit or two).
            greens = [float(camera.read()[..., 1].mean()) for _ in range(3)]
            assert all(abs(a - b) > 4 for a, b in itertools.combinations(greens, 2)), greens
            assert camera.read_latest().shape == (48, 64, 3)
        finally:
            camera.disconnect()
        assert not camera.is_connected


def frame_message(green: int, name: str = "head") -> str:
    image = np.full((48, 64, 3), (200, green, 60), np.uint8)
    _, jpeg = cv2.imencode(".jpg", image, [int(cv2.IMWRITE_JPEG_QUALITY), 95])
    return json.dumps(
        {"timestamps": {name: 0.0}, "images": {name: base64.b64encode(jpeg).decode()}}
    )


def test_a_frame_followed_by_other_messages_before_the_read_is_still_read():
    """A server may send image-less messages, or other cameras' images, right after a frame:
    keeping only the newest message (ZMQ's CONFLATE, as LeRobot's camera does) would lose the
    frame. The capture is driven by hand here so the messages surely wait together."""
    context = zmq.Context()
    server = context.socket(zmq.PUB)
    server.setsockopt(zmq.LINGER, 0)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    camera = zmq_camera(port, timeout_ms=1000)
    camera._open()
    try:
        # The subscription reaches the publisher some time after connecting.
        deadline = time.monotonic() + PATIENT_MS / 1000
        while not camera._socket.poll(50, zmq.POLLIN):
            assert time.monotonic() < deadline, "the subscriber never joined"
            server.send_string(frame_message(0))
        camera._grab()
        camera._names_seen.add("wrist")  # a two-camera server
        server.send_string(frame_message(120))
        server.send_string(json.dumps({"timestamps": {}, "images": {}}))
        server.send_string(frame_message(240, name="wrist"))
        time.sleep(0.3)
        assert abs(float(camera._grab()[..., 1].mean()) - 120) < 6
    finally:
        camera._close()
        server.close()
        context.term()


def test_bgr_swaps_the_channels_and_a_size_other_than_the_configured_one_is_named():
    with publisher() as port:
        camera = zmq_camera(port, color_mode="bgr", timeout_ms=PATIENT_MS)
        camera.connect()
        try:
            assert abs(int(camera.read()[..., 2].mean()) - 200) < 6
        finally:
            camera.disconnect()
        wrong = zmq_camera(port, width=640, height=480, timeout_ms=PATIENT_MS)
        with pytest.raises(HardwareError, match="64x48, the camera was configured as 640x480"):
            wrong.connect()
            wrong.read()
        wrong.disconnect()


def connected(port: int, timeout_ms: int) -> ZMQCamera:
    """A camera with a short `timeout_ms`, connected once the publisher's frames reach it (a
    first attempt may time out while a loaded machine starts the publisher)."""
    deadline = time.monotonic() + PATIENT_MS / 1000
    while True:
        camera = zmq_camera(port, timeout_ms=timeout_ms)
        try:
            camera.connect()
            return camera
        except HardwareError:
            if time.monotonic() > deadline:
                raise


def test_a_publisher_that_stops_is_one_error_naming_the_camera_and_its_address():
    with publisher() as port:
        camera = connected(port, timeout_ms=400)
        _PUBLISHERS[port].kill()
        try:
            with pytest.raises(HardwareError) as caught:
                for _ in range(100):
                    camera.read()
            assert caught.value.where == f"zmq head@127.0.0.1:{port}"
            assert f"no frame from the publisher at tcp://127.0.0.1:{port} for 400 ms" in (
                caught.value.message
            )
            with pytest.raises(HardwareError, match="no frame from the publisher"):
                camera.read_latest()  # every later read says the same
        finally:
            camera.disconnect()


def test_nobody_publishing_fails_the_connection_with_the_address_to_check():
    with publisher(frames=0) as port:  # bound and gone: nothing listens there
        pass
    camera = zmq_camera(port, timeout_ms=300)
    with pytest.raises(HardwareError) as caught:
        camera.connect()
    assert f"tcp://127.0.0.1:{port}" in caught.value.hint
    assert not camera.is_connected


def test_settings_are_read_as_lerobots_and_bad_ones_refused():
    config = structure(
        {"front": {"type": "zmq", "server_address": "10.0.0.2", "port": 5556}},
        dict[str, CameraConfig],
    )
    assert config["front"] == ZMQCameraConfig(server_address="10.0.0.2", port=5556)
    assert config["front"].camera_name == "zmq_camera" and config["front"].timeout_ms == 5000
    with pytest.raises(ConfigError, match=r"port must be in 1\.\.65535"):
        ZMQCameraConfig(server_address="x", port=70000)
    with pytest.raises(ConfigError, match="server_address must name"):
        ZMQCameraConfig(server_address="")
    with pytest.raises(ConfigError, match="timeout_ms must be positive"):
        ZMQCameraConfig(server_address="x", timeout_ms=0)
