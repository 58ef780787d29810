"""The OpenCV camera on a generated video file, the synthetic camera, and camera configs."""

from __future__ import annotations

import threading
import time

import cv2
import numpy as np
import pytest
import structlog
import structlog.testing

from rlctl.adapters.cameras.capture_thread import CaptureThreadCamera
from rlctl.adapters.cameras.config import (
    CameraConfig,
    OpenCVCameraConfig,
    SyntheticCameraConfig,
    build_cameras,
)
from rlctl.adapters.cameras.opencv import OpenCVCamera, find_cameras
from rlctl.adapters.memory.camera import SyntheticCamera, frame_number
from rlctl.domain.config import structure
from rlctl.domain.errors import ConfigError, HardwareError

WIDTH, HEIGHT, FRAMES = 64, 48, 12


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> str:
    """Frame k: red everywhere, blue = 20 k, a white square in the top-left corner (BGR file)."""
    path = tmp_path_factory.mktemp("video") / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30, (WIDTH, HEIGHT))
    for k in range(FRAMES):
        frame = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
        frame[..., 2] = 200
        frame[..., 0] = 20 * k
        frame[:8, :8] = 255
        writer.write(frame)
    writer.release()
    return str(path)


def camera(video: str, **config) -> OpenCVCamera:
    config.setdefault("width", WIDTH)
    config.setdefault("height", HEIGHT)
    return OpenCVCamera(OpenCVCameraConfig(index_or_path=video, **config))


def test_a_video_file_plays_in_order_in_rgb_at_its_rate(video):
    cam = camera(video)
    cam.connect()
    try:
        assert (cam.height, cam.width, cam.fps) == (HEIGHT, WIDTH, 30)
        started = time.perf_counter()
        frames = [cam.async_read(timeout_s=1.0) for _ in range(6)]
        elapsed = time.perf_counter() - started
    finally:
        cam.disconnect()
    assert all(f.shape == (HEIGHT, WIDTH, 3) and f.dtype == np.uint8 for f in frames)
    assert frames[0][40, 40, 0] > 150  # red first: the file's BGR was converted
    blues = [int(f[40, 40, 2]) for f in frames]
    assert blues == sorted(blues) and blues[-1] - blues[0] >= 60  # new frames, in order
    assert elapsed > 4 / 30  # paced like a camera, not decoded flat out
    assert not cam.is_connected


def test_rotation_and_bgr(video):
    cam = camera(video, width=HEIGHT, height=WIDTH, rotation=90, color_mode="bgr")
    cam.connect()
    try:
        frame = cam.read()
    finally:
        cam.disconnect()
    assert frame.shape == (WIDTH, HEIGHT, 3)
    assert frame[40, 20, 2] > 150  # still BGR
    assert frame[:8, -8:].min() > 200  # the top-left square turned to the top-right


def test_the_end_of_a_file_is_a_clear_error_unless_it_loops(video):
    cam = camera(video)
    cam.connect()
    time.sleep(FRAMES / 30 + 0.3)
    with pytest.raises(HardwareError, match="source ended"):
        cam.read_latest()
    cam.disconnect()

    looping = camera(video, loop=True)
    looping.connect()
    try:
        time.sleep(FRAMES / 30 + 0.2)
        assert looping.read_latest(max_age_s=0.2).shape == (HEIGHT, WIDTH, 3)
    finally:
        looping.disconnect()


def test_what_cannot_open_says_why(video, tmp_path):
    with pytest.raises(HardwareError, match="no such device") as caught:
        camera(str(tmp_path / "missing.avi")).connect()
    assert "find-cameras" in caught.value.hint
    with pytest.raises(HardwareError, match="not the 640x480 configured"):
        camera(video, width=640, height=480).connect()
    garbage = tmp_path / "garbage.avi"
    garbage.write_bytes(b"not a video")
    with pytest.raises(HardwareError, match="cannot open"):
        camera(str(garbage)).connect()


def test_find_cameras_lists_what_opens():
    assert all(c.width > 0 for c in find_cameras())  # none on a CI machine, and no crash


def test_the_synthetic_camera_delivers_at_its_rate_until_it_stops():
    cam = SyntheticCamera(32, 24, fps=50, stop_after=10)
    cam.connect()
    try:
        first = cam.read()
        second = cam.async_read(timeout_s=0.5)
        assert frame_number(second) > frame_number(first)
        time.sleep(0.4)
        assert frame_number(cam.async_read(timeout_s=0.05)) == 9  # the newest, once
        with pytest.raises(HardwareError, match="no new frame"):
            cam.async_read(timeout_s=0.05)
        with pytest.raises(HardwareError, match="stopped delivering"):
            cam.read_latest(max_age_s=0.1)
    finally:
        cam.disconnect()


def test_camera_configs_read_lerobots_syntax_and_build_cameras(video):
    cameras = structure(
        f"{{front: {{type: opencv, index_or_path: {video}, width: 64, height: 48}}, "
        "side: {type: synthetic, fps: 15}}",
        dict[str, CameraConfig],
    )
    assert isinstance(cameras["front"], OpenCVCameraConfig)
    assert cameras["side"] == SyntheticCameraConfig(fps=15)
    assert (
        structure({"cam": {"type": "opencv", "index_or_path": "2"}}, dict[str, CameraConfig])[
            "cam"
        ].index_or_path
        == 2
    )
    built = build_cameras(cameras)
    assert isinstance(built["front"], OpenCVCamera) and isinstance(built["side"], SyntheticCamera)
    with pytest.raises(ConfigError, match="width and height"):
        OpenCVCameraConfig(index_or_path=0).frame_size("front")
    assert OpenCVCameraConfig(width=640, height=480, rotation=90).frame_size("f") == (640, 480)


class _Gated(CaptureThreadCamera):
    """A capture that delivers one frame per opening of its gate (a thread kept off the CPU)."""

    def __init__(self) -> None:
        super().__init__(first_frame_timeout_s=2.0)
        self.gate = threading.Semaphore(1)

    @property
    def name(self) -> str:
        return "gated"

    def _open(self) -> None:
        pass

    def _grab(self) -> np.ndarray | None:
        while not self.gate.acquire(timeout=0.05):
            if self._stop.is_set():
                return None
        return np.zeros((2, 2, 3), np.uint8)

    def _close(self) -> None:
        pass


def test_a_capture_late_for_a_moment_is_waited_for_and_a_dead_one_named():
    cam = _Gated()
    cam.connect()
    try:
        # Bounds of a second: a loaded machine may start the timer late, never by that much.
        time.sleep(1.1)  # the newest frame is now older than the bound below
        threading.Timer(0.1, cam.gate.release).start()  # and the capture catches up
        cam.read_latest(max_age_s=1.0)
        time.sleep(1.1)
        started = time.monotonic()
        with pytest.raises(HardwareError, match="stopped delivering"):
            cam.read_latest(max_age_s=1.0)
        assert 0.95 <= time.monotonic() - started < 5.0
    finally:
        cam.disconnect()


class _NeverCloses(_Gated):
    """A driver whose close never returns (librealsense's pipeline stop was seen to hang)."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def _close(self) -> None:
        self.released.wait(60)


def test_a_driver_that_never_closes_does_not_hang_the_disconnect(monkeypatch):
    from rlctl.adapters.cameras import capture_thread

    monkeypatch.setattr(capture_thread, "CLOSE_TIMEOUT_S", 0.3)
    cam = _NeverCloses()
    cam.connect()
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        cam.disconnect()
    assert time.monotonic() - started < 5.0
    assert not cam.is_connected
    assert any("did not close" in entry["event"] for entry in logs)
    cam.released.set()
