"""Depth over LeKiwi's ZeroMQ link: a RealSense recording played back as the host's camera (the
SDK's own `.db3`), on an emulated LeKiwi bus; the client gets the depth as uint16 millimetres,
value for value (16-bit PNG in the header's `_depth`), beside the JPEG colour; LeRobot 0.6.1's
client reads the same message and ignores the depth (opt-in: RLCTL_LEROBOT_PYTHON)."""

from __future__ import annotations

import base64
import importlib.util
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.cameras.config import RealSenseCameraConfig, SyntheticCameraConfig
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import LeKiwiClientConfig, LeKiwiConfig
from rlctl.adapters.robots.lekiwi import STATE_NAMES, lekiwi
from rlctl.adapters.robots.lekiwi_client import LeKiwiClient
from rlctl.adapters.robots.lekiwi_host import LeKiwiHost, encode_depth, encode_observation
from rlctl.application.robot_features import STATE_KEY
from rlctl.domain.errors import HardwareError

from .test_lekiwi import free_ports, kiwi_bus, write_calibration

__all__ = ["kiwi_bus"]
pytestmark = pytest.mark.timeout(120)

WIDTH, HEIGHT, FPS = 32, 24, 30
FRONT = "observation.images.front"


def _recording_module():
    path = Path(__file__).parents[1] / "cameras" / "realsense_recording.py"
    spec = importlib.util.spec_from_file_location("realsense_recording", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _depth_index(depth: np.ndarray) -> int:
    """Which recorded frame a depth image is (its value at row 0, column 2 is 420 + 17 i)."""
    return (int(depth[0, 2, 0]) - 420) // 17


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> tuple[object, Path]:
    pytest.importorskip("pyrealsense2")
    module = _recording_module()
    path = module.record(tmp_path_factory.mktemp("rs") / "d435.db3", WIDTH, HEIGHT, FPS, 20)
    return module, path


def _camera(path: Path, *, use_depth: bool = True, use_rgb: bool = True) -> RealSenseCameraConfig:
    return RealSenseCameraConfig(
        serial_number_or_name=str(path),
        width=WIDTH,
        height=HEIGHT,
        fps=FPS,
        use_depth=use_depth,
        use_rgb=use_rgb,
        loop=True,
    )


@pytest.fixture
def served(kiwi_bus, recording, tmp_path, request) -> Iterator[tuple[int, int, object]]:
    """A host on the emulated bus with the recording as its `front` camera (colour and depth;
    depth alone when the test is parametrized with `use_rgb` False)."""
    module, path = recording
    use_rgb = getattr(request, "param", True)
    write_calibration(tmp_path, "kiwi")
    front = _camera(path, use_rgb=use_rgb)
    robot = lekiwi(
        LeKiwiConfig(port=kiwi_bus.port, id="kiwi", cameras={"front": front}),
        calibration_store=CalibrationFiles(root=tmp_path),
    )
    cmd, obs = free_ports(2)
    host = LeKiwiHost(
        robot,
        port_zmq_cmd=cmd,
        port_zmq_observations=obs,
        connection_time_s=60,
        bind_address="127.0.0.1",
    )
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            host.run()
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield cmd, obs, module
    finally:
        host.stop_event.set()
        thread.join(timeout=10)
    assert not failure, failure


def _client(cmd: int, obs: int, camera: object) -> LeKiwiClient:
    return LeKiwiClient(
        LeKiwiClientConfig(
            remote_ip="127.0.0.1",
            port_zmq_cmd=cmd,
            port_zmq_observations=obs,
            cameras={"front": camera},  # type: ignore[dict-item]
            connect_timeout_s=20,
        )
    )


def test_the_client_gets_the_hosts_depth_value_for_value(served, recording):
    cmd, obs, module = served
    client = _client(cmd, obs, _camera(recording[1]))
    assert list(client.observation_features) == [STATE_KEY, FRONT, f"{FRONT}_depth"]
    depth_spec = client.observation_features[f"{FRONT}_depth"]
    assert depth_spec.is_depth_map and depth_spec.shape == (HEIGHT, WIDTH, 1)
    client.connect()
    try:
        seen = set()
        for _ in range(40):
            observation = client.get_observation()
            depth = observation[f"{FRONT}_depth"]
            assert depth.dtype == np.uint16 and depth.shape == (HEIGHT, WIDTH, 1)
            i = _depth_index(depth)
            np.testing.assert_array_equal(depth[..., 0], module.depth_frame(i, HEIGHT, WIDTH))
            # The colour of the same frame set (through JPEG: its blue channel is about 3 i).
            color = observation[FRONT]
            assert color.shape == (HEIGHT, WIDTH, 3)
            assert abs(float(color[..., 2].mean()) - 3 * i) < 6
            assert observation[STATE_KEY].shape == (len(STATE_NAMES),)
            seen.add(i)
            if len(seen) >= 3:
                break
            client.send_action(observation[STATE_KEY])  # keep the host's watchdog fed
        assert len(seen) >= 3
    finally:
        client.disconnect()

    # A client that wants no depth gets colour only from the same host.
    plain = _client(cmd, obs, _camera(recording[1], use_depth=False))
    plain.connect()
    try:
        assert set(plain.get_observation()) == {STATE_KEY, FRONT}
    finally:
        plain.disconnect()


@pytest.mark.parametrize("served", [False], indirect=True)
def test_a_depth_only_camera_sends_its_depth_alone(served, recording):
    cmd, obs, module = served
    client = _client(cmd, obs, _camera(recording[1], use_rgb=False))
    assert list(client.observation_features) == [STATE_KEY, f"{FRONT}_depth"]
    client.connect()
    try:
        observation = client.get_observation()
        assert set(observation) == {STATE_KEY, f"{FRONT}_depth"}
        depth = observation[f"{FRONT}_depth"]
        i = _depth_index(depth)
        np.testing.assert_array_equal(depth[..., 0], module.depth_frame(i, HEIGHT, WIDTH))
    finally:
        client.disconnect()


def test_depth_survives_the_encoding_and_bad_depth_is_refused_or_dropped():
    rng = np.random.default_rng(0)
    depth = rng.integers(0, 65536, (HEIGHT, WIDTH, 1), dtype=np.uint16)
    depth[0, 0, 0], depth[0, 1, 0] = 0, 65535
    observation = {
        STATE_KEY: np.arange(9, dtype=np.float32),
        FRONT: np.zeros((HEIGHT, WIDTH, 3), np.uint8),
        f"{FRONT}_depth": depth,
    }
    parts = encode_observation(observation, ["front"], ["front"])
    assert len(parts) == 2  # the header and one JPEG: no frame LeRobot's client would not zip
    client = _client(1, 2, _camera(Path("x.db3")))
    client._parse(parts)
    np.testing.assert_array_equal(client._depth_frames["front"], depth)
    np.testing.assert_array_equal(client._state, np.arange(9))

    with pytest.raises(HardwareError, match="uint16"):
        encode_depth(depth.astype(np.float32))
    # A corrupted depth drops the whole observation: no colour without its depth.
    header = json.loads(parts[0])
    header["_depth"]["front_depth"] = "not base64!"
    header["arm_shoulder_pan.pos"] = 99.0
    client._parse([json.dumps(header).encode(), parts[1]])
    assert client._state is not None and client._state[0] == 0.0
    header["_depth"]["front_depth"] = base64.b64encode(b"\x89PNG garbage").decode()
    client._parse([json.dumps(header).encode(), parts[1]])
    assert client._state[0] == 0.0
    import cv2

    # A depth image of another size is refused from its header, before it is decoded.
    _, big = cv2.imencode(".png", np.zeros((HEIGHT * 2, WIDTH), np.uint16))
    header["_depth"]["front_depth"] = base64.b64encode(big.tobytes()).decode()
    with pytest.raises(HardwareError, match="sends 32x48 depth, the client declares 32x24"):
        client._parse([json.dumps(header).encode(), parts[1]])
    # 8-bit depth (not what an rlctl host sends) is refused, naming the camera.
    _, png = cv2.imencode(".png", np.zeros((HEIGHT, WIDTH), np.uint8))
    header["_depth"]["front_depth"] = base64.b64encode(png.tobytes()).decode()
    with pytest.raises(HardwareError, match="'front' as uint8"):
        client._parse([json.dumps(header).encode(), parts[1]])


def test_a_client_asking_depth_of_a_host_without_it_is_told(kiwi_bus, tmp_path):
    write_calibration(tmp_path, "kiwi")
    camera = SyntheticCameraConfig(width=WIDTH, height=HEIGHT, fps=30)
    robot = lekiwi(
        LeKiwiConfig(port=kiwi_bus.port, id="kiwi", cameras={"front": camera}),
        calibration_store=CalibrationFiles(root=tmp_path),
    )
    cmd, obs = free_ports(2)
    host = LeKiwiHost(robot, port_zmq_cmd=cmd, port_zmq_observations=obs, bind_address="127.0.0.1")
    thread = threading.Thread(target=host.run, daemon=True)
    thread.start()
    client = _client(cmd, obs, _camera(Path("front.db3")))
    try:
        client.connect()
        with pytest.raises(HardwareError, match="sends no depth of camera 'front'") as caught:
            client.get_observation()
        assert "use_depth" in (caught.value.hint or "")
    finally:
        client.disconnect()
        host.stop_event.set()
        thread.join(timeout=10)


LEROBOT_CLIENT = """
import base64, json, sys, types
from lerobot.cameras.opencv import OpenCVCameraConfig
from lerobot.robots.lekiwi import LeKiwiClient, LeKiwiClientConfig
sys.modules.setdefault("zmq", types.ModuleType("zmq"))  # its __init__ imports zmq; unused here

parts = [base64.b64decode(p) for p in json.loads(open(sys.argv[1]).read())]
client = LeKiwiClient(LeKiwiClientConfig(remote_ip="127.0.0.1", cameras={
    "front": OpenCVCameraConfig(index_or_path=0, width=32, height=24, fps=30)}))
client._poll_and_get_latest_message = lambda: parts
frames, state = client._get_data()
print(json.dumps({"cameras": {k: list(v.shape) for k, v in frames.items()},
                  "state": {k: float(v) for k, v in state.items() if k != "observation.state"},
                  "keys": sorted(state)}))
"""


@pytest.mark.lerobot
def test_lerobots_client_reads_a_message_with_depth_and_ignores_the_depth(lerobot, tmp_path):
    depth = np.full((HEIGHT, WIDTH, 1), 1234, np.uint16)
    observation = {
        STATE_KEY: np.arange(9, dtype=np.float32),
        FRONT: np.full((HEIGHT, WIDTH, 3), 100, np.uint8),
        f"{FRONT}_depth": depth,
    }
    parts = encode_observation(observation, ["front"], ["front"])
    message = tmp_path / "message.json"
    message.write_text(json.dumps([base64.b64encode(p).decode() for p in parts]))
    theirs = lerobot("-c", LEROBOT_CLIENT, str(message))
    assert theirs["cameras"] == {"front": [HEIGHT, WIDTH, 3]}
    assert theirs["state"] == {name: float(i) for i, name in enumerate(STATE_NAMES)}
