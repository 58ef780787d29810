"""The Intel RealSense camera on a recording the SDK itself made: colour and depth frames come back
pixel for pixel (rotated, BGR, depth in millimetres from the device's unit), the camera is found
by serial number or name (a software device in the SDK's context), and what cannot be opened is
said with what there is."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.cameras import discovery, realsense
from rlctl.adapters.cameras.config import CameraConfig, RealSenseCameraConfig
from rlctl.adapters.cameras.realsense import RealSenseCamera
from rlctl.adapters.cameras.robot_frames import camera_features, read_cameras
from rlctl.domain.config import converter
from rlctl.domain.errors import ConfigError, HardwareError

rs = pytest.importorskip("pyrealsense2")
pytestmark = pytest.mark.timeout(60)

WIDTH, HEIGHT, FPS = 32, 24, 30


def load():
    path = Path(__file__).with_name("realsense_recording.py")
    spec = importlib.util.spec_from_file_location("realsense_recording", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


recording = load()


@pytest.fixture(scope="module")
def bag(tmp_path_factory) -> Path:
    """One second of colour and depth, as the SDK records it."""
    return recording.record(tmp_path_factory.mktemp("rs") / "d435.db3", WIDTH, HEIGHT, FPS, 30)


def camera(path: Path, **settings) -> RealSenseCamera:
    config = converter.structure(
        {"type": "intelrealsense", "serial_number_or_name": str(path), **settings}, CameraConfig
    )
    assert isinstance(config, RealSenseCameraConfig)
    built = config.build()
    assert isinstance(built, RealSenseCamera)
    return built


def frame_number(color: np.ndarray) -> int:
    """Which recorded frame a colour frame is (its blue channel is 3 i)."""
    return int(color[0, 0, 2]) // 3


def test_colour_and_depth_of_one_frame_set_come_back_as_recorded(bag):
    cam = camera(bag, use_depth=True, width=WIDTH, height=HEIGHT, fps=FPS)
    cam.connect()
    try:
        assert cam.is_connected and (cam.height, cam.width, cam.fps) == (HEIGHT, WIDTH, FPS)
        assert cam.name == f"intelrealsense {recording.SERIAL}"
        seen = set()
        for _ in range(5):
            color, depth = cam.read_latest_with_depth()
            i = frame_number(color)
            np.testing.assert_array_equal(color, recording.color_frame(i, HEIGHT, WIDTH))
            assert depth.dtype == np.uint16 and depth.shape == (HEIGHT, WIDTH, 1)
            np.testing.assert_array_equal(depth[..., 0], recording.depth_frame(i, HEIGHT, WIDTH))
            seen.add(i)
            cam.async_read(timeout_s=1.0)
        assert len(seen) >= 3  # frames keep coming at the recorded pace
    finally:
        cam.disconnect()
    assert not cam.is_connected


def test_rotation_and_bgr_apply_to_colour_and_depth(bag):
    cam = camera(
        bag, use_depth=True, rotation=90, color_mode="bgr", width=HEIGHT, height=WIDTH, fps=FPS
    )
    cam.connect()
    try:
        assert (cam.height, cam.width) == (WIDTH, HEIGHT)
        color, depth = cam.read_latest_with_depth()
        i = int(color[0, 0, 0]) // 3  # BGR: blue first
        expected = np.rot90(recording.color_frame(i, HEIGHT, WIDTH), k=-1)[..., ::-1]
        np.testing.assert_array_equal(color, expected)
        np.testing.assert_array_equal(
            depth[..., 0], np.rot90(recording.depth_frame(i, HEIGHT, WIDTH), k=-1)
        )
    finally:
        cam.disconnect()


def test_depth_in_tenths_of_a_millimetre_comes_out_in_millimetres(tmp_path):
    """A D405 counts depth in 0.1 mm: the camera gives millimetres, as the dataset says."""
    path = recording.record(tmp_path / "d405.db3", WIDTH, HEIGHT, FPS, 12, depth_units=0.0001)
    cam = camera(path, use_depth=True)
    cam.connect()
    try:
        color, depth = cam.read_latest_with_depth()
        raw = recording.depth_frame(frame_number(color), HEIGHT, WIDTH)
        np.testing.assert_array_equal(depth[..., 0], np.rint(raw / 10.0).astype(np.uint16))
    finally:
        cam.disconnect()


def test_a_robot_declares_and_reads_the_depth_feature(bag):
    cam = camera(bag, use_depth=True, width=WIDTH, height=HEIGHT, fps=FPS)
    features = camera_features({"wrist": cam}, {"wrist": (HEIGHT, WIDTH)})
    assert list(features) == ["observation.images.wrist", "observation.images.wrist_depth"]
    depth = features["observation.images.wrist_depth"]
    assert depth.shape == (HEIGHT, WIDTH, 1) and depth.is_depth_map and depth.dtype == "video"
    cam.connect()
    try:
        frames = read_cameras({"wrist": cam})
    finally:
        cam.disconnect()
    i = frame_number(frames["observation.images.wrist"])
    np.testing.assert_array_equal(
        frames["observation.images.wrist_depth"][..., 0], recording.depth_frame(i, HEIGHT, WIDTH)
    )


def test_the_end_of_a_recording_is_said_and_loop_plays_it_again(tmp_path):
    short = recording.record(tmp_path / "short.db3", WIDTH, HEIGHT, FPS, 8)
    cam = camera(short)
    cam.connect()
    try:
        with pytest.raises(HardwareError) as raised:
            for _ in range(40):
                cam.async_read(timeout_s=2.0)
        assert "the source ended" in raised.value.message
        assert "loop" in raised.value.hint
        assert raised.value.where == f"intelrealsense {recording.SERIAL}"
    finally:
        cam.disconnect()
    looped = camera(short, loop=True)
    looped.connect()
    try:
        for _ in range(20):  # over twice the recording's 8 frames
            looped.async_read(timeout_s=2.0)
    finally:
        looped.disconnect()


def test_a_camera_is_found_by_serial_or_name_in_the_sdks_context_and_listed(bag, monkeypatch):
    context = rs.context()
    # The recorded device, listed as a plugged-in one while the handle lives.
    loaded = context.load_device(str(bag))
    monkeypatch.setattr(realsense, "context", lambda: context)
    assert realsense.find_serial(recording.SERIAL, context) == recording.SERIAL
    assert realsense.find_serial(recording.NAME, context) == recording.SERIAL
    with pytest.raises(HardwareError) as raised:
        realsense.find_serial("000000000000", context)
    error = raised.value
    assert "no RealSense camera has the serial number or name '000000000000'" in error.message
    assert f"found: {recording.SERIAL} ({recording.NAME})" in error.message
    assert "rlctl find-cameras" in error.hint
    # A camera that is not there fails to connect with the same message.
    missing = RealSenseCameraConfig(serial_number_or_name="Intel RealSense D455").build()
    with pytest.raises(HardwareError, match="found: 123456789012"):
        missing.connect()
    found = discovery.find_all()
    listed = [c for c in found.cameras if c.kind == "intelrealsense"]
    assert [(c.id, c.width, c.height, c.fps) for c in listed] == [
        (recording.SERIAL, WIDTH, HEIGHT, FPS)
    ]
    assert listed[0].detail == f"{recording.NAME}, colour and depth"
    assert listed[0].settings == {"serial_number_or_name": recording.SERIAL}
    del loaded


def test_two_cameras_of_one_name_ask_for_the_serial(tmp_path):
    context = rs.context()
    loaded = []
    for serial in ("111111111111", "222222222222"):
        path = recording.record(tmp_path / f"{serial}.db3", WIDTH, HEIGHT, FPS, 2, serial=serial)
        loaded.append(context.load_device(str(path)))
    with pytest.raises(HardwareError) as raised:
        realsense.find_serial(recording.NAME, context)
    assert "2 RealSense cameras are named" in raised.value.message
    assert "111111111111, 222222222222" in raised.value.message


def test_bad_settings_are_refused_with_what_to_write(tmp_path):
    with pytest.raises(ConfigError, match="together or not at all"):
        RealSenseCameraConfig(serial_number_or_name="123", fps=30)
    with pytest.raises(ConfigError, match="would give nothing"):
        RealSenseCameraConfig(serial_number_or_name="123", use_rgb=False)
    with pytest.raises(ConfigError, match="must name the camera"):
        RealSenseCameraConfig(serial_number_or_name=" ")
    with pytest.raises(HardwareError, match="no such RealSense recording"):
        RealSenseCameraConfig(serial_number_or_name=str(tmp_path / "none.db3")).build().connect()


def test_a_profile_the_camera_does_not_stream_is_said(bag):
    cam = camera(bag, width=64, height=48, fps=30)
    with pytest.raises(HardwareError) as raised:
        cam.connect()
    assert "does not stream colour at 64x48 and 30 fps" in raised.value.message
    assert not cam.is_connected


def test_depth_from_a_camera_opened_without_it_is_refused(bag):
    cam = camera(bag)
    cam.connect()
    try:
        with pytest.raises(HardwareError, match="opened without depth"):
            cam.read_latest_depth()
    finally:
        cam.disconnect()


def test_a_depth_only_camera_gives_depth_alone_as_recorded(bag):
    """LeRobot's `use_rgb: false`: the depth stream alone, a robot records `<camera>_depth`
    only, and colour reads say there is none."""
    cam = camera(bag, use_rgb=False, use_depth=True, width=WIDTH, height=HEIGHT, fps=FPS)
    features = camera_features({"wrist": cam}, {"wrist": (HEIGHT, WIDTH)})
    assert list(features) == ["observation.images.wrist_depth"]
    cam.connect()
    try:
        assert (cam.height, cam.width, cam.fps) == (HEIGHT, WIDTH, FPS)
        seen = set()
        for _ in range(5):
            depth = cam.read_latest_depth()
            assert depth.dtype == np.uint16 and depth.shape == (HEIGHT, WIDTH, 1)
            i = (int(depth[0, 2, 0]) - 420) // 17  # its value at (0, 2) is 420 + 17 i
            np.testing.assert_array_equal(depth[..., 0], recording.depth_frame(i, HEIGHT, WIDTH))
            seen.add(i)
            frames = read_cameras({"wrist": cam})
            assert list(frames) == ["observation.images.wrist_depth"]
            cam._stop.wait(0.05)
        assert len(seen) >= 2  # frames keep coming at the recorded pace
        for read in (cam.read_latest, cam.read, cam.read_latest_with_depth):
            with pytest.raises(HardwareError, match="without colour"):
                read()
    finally:
        cam.disconnect()

    rotated = camera(bag, use_rgb=False, use_depth=True, rotation=180)
    rotated.connect()
    try:
        depth = rotated.read_latest_depth()
        i = (int(depth[-1, -3, 0]) - 420) // 17
        np.testing.assert_array_equal(
            depth[..., 0], np.rot90(recording.depth_frame(i, HEIGHT, WIDTH), k=2)
        )
    finally:
        rotated.disconnect()


class FakeColourSensor:
    """A colour module's options as the SDK exposes them: what it supports, its ranges, and the
    calls made on it, in order."""

    def __init__(self, name: str, supported: set, limits: dict | None = None) -> None:
        self.name, self.supported, self.limits, self.calls = name, supported, limits or {}, []

    def get_info(self, info):
        assert info == rs.camera_info.name
        return self.name

    def supports(self, option) -> bool:
        return option in self.supported

    def set_option(self, option, value) -> None:
        low, high = self.limits.get(option, (-1e9, 1e9))
        if not low <= value <= high:
            raise RuntimeError("object doesn't support option value")
        self.calls.append((option, value))

    def get_option_range(self, option):
        low, high = self.limits[option]
        return type("Range", (), {"min": low, "max": high, "step": 1.0, "default": low})()


class FakeDevice:
    def __init__(self, *sensors: FakeColourSensor) -> None:
        self.sensors = sensors

    def query_sensors(self):
        return list(self.sensors)


EVERY_OPTION = {
    rs.option.enable_auto_exposure, rs.option.exposure, rs.option.gain,
    rs.option.enable_auto_white_balance, rs.option.white_balance,
}  # fmt: skip


def colour_options(**settings) -> RealSenseCamera:
    return RealSenseCamera(RealSenseCameraConfig(serial_number_or_name="123456789012", **settings))


def test_exposure_gain_and_white_balance_turn_the_automatic_ones_off_first_as_lerobot():
    sensor = FakeColourSensor("RGB Camera", EVERY_OPTION)
    depth = FakeColourSensor("Stereo Module", EVERY_OPTION)
    colour_options(exposure=120, gain=64, white_balance=4600)._set_colour_options(
        rs, FakeDevice(depth, sensor)
    )
    assert sensor.calls == [
        (rs.option.enable_auto_exposure, 0), (rs.option.exposure, 120), (rs.option.gain, 64),
        (rs.option.enable_auto_white_balance, 0), (rs.option.white_balance, 4600),
    ]  # fmt: skip
    assert depth.calls == []  # the depth's module is never touched
    only_gain = FakeColourSensor("RGB Camera", EVERY_OPTION)
    colour_options(gain=10)._set_colour_options(rs, FakeDevice(only_gain))
    assert only_gain.calls == [(rs.option.enable_auto_exposure, 0), (rs.option.gain, 10)]


def test_what_the_colour_sensor_cannot_take_is_one_error_naming_it():
    d405 = FakeDevice(FakeColourSensor("Stereo Module", EVERY_OPTION))
    with pytest.raises(HardwareError, match="dedicated colour module") as raised:
        colour_options(exposure=100)._set_colour_options(rs, d405)
    assert "Stereo Module" in raised.value.message
    no_gain = FakeDevice(FakeColourSensor("RGB Camera", EVERY_OPTION - {rs.option.gain}))
    with pytest.raises(HardwareError, match="no gain setting"):
        colour_options(gain=100)._set_colour_options(rs, no_gain)
    narrow = FakeColourSensor("RGB Camera", EVERY_OPTION, {rs.option.exposure: (1, 10000)})
    with pytest.raises(HardwareError, match=r"exposure = 20000 \(the sensor takes 1 to 10000"):
        colour_options(exposure=20000)._set_colour_options(rs, FakeDevice(narrow))


def test_colour_settings_without_colour_or_on_a_recording_are_refused(bag):
    with pytest.raises(ConfigError, match="use_rgb is false"):
        RealSenseCameraConfig(
            serial_number_or_name="123", use_rgb=False, use_depth=True, exposure=100
        )
    with pytest.raises(ConfigError, match="cannot be set on a recording"):
        RealSenseCameraConfig(serial_number_or_name=str(bag), white_balance=4600)
    with pytest.raises(ConfigError, match="whole number"):
        RealSenseCameraConfig(serial_number_or_name="123", gain=1.5)  # type: ignore[arg-type]
    assert RealSenseCameraConfig(serial_number_or_name="123", exposure=5).colour_options == {
        "exposure": 5
    }
