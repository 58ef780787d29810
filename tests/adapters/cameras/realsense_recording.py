"""A RealSense camera without the camera: the SDK's own software device, recorded and played back.

`software_camera` builds a device with a "Stereo Module" (Z16 depth) and an "RGB Camera" (RGB8)
sensor as a D400 has them; `record` feeds it frames at their pace through the SDK's recorder,
which writes the ROS2 `.db3` file `rs.config.enable_device_from_file` plays back (SDK 2.59 no
longer writes `.bag`). A context that loads the file sees the device it recorded, serial number
and name (the SDK lists a software device added to a context nowhere). The frames are known
functions of their number (`color_frame`, `depth_frame`), so a test checks what the camera
adapter gives back pixel for pixel.

Loaded by the tests with `load()` (pytest's importlib mode puts no test folder on `sys.path`), or
run as a script: `python realsense_recording.py OUT.db3 WIDTH HEIGHT FPS FRAMES`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SERIAL = "123456789012"
NAME = "Intel RealSense D435 (software)"


def color_frame(i: int, height: int, width: int) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width]
    return np.stack(
        [(xx * 7 + 11 * i) % 256, (yy * 9 + 5 * i) % 256, np.full_like(xx, (3 * i) % 256)],
        axis=-1,
    ).astype(np.uint8)


def depth_frame(i: int, height: int, width: int) -> np.ndarray:
    """Raw Z16 units: a slanted plane 0.3-3 m away (in millimetres at the default unit), moving
    with the frame number, with a hole (0: no reading) in a corner."""
    yy, xx = np.mgrid[0:height, 0:width]
    depth = 300 + 60 * xx + 25 * yy + 17 * i
    depth[:2, :2] = 0
    return depth.astype(np.uint16)


def software_camera(
    width: int, height: int, fps: int, *, depth_units: float = 0.001, serial: str = SERIAL
) -> tuple[Any, dict[str, tuple[Any, Any]]]:
    """The device and, per stream, (sensor, profile)."""
    import pyrealsense2 as rs

    device = rs.software_device()
    device.register_info(rs.camera_info.serial_number, serial)
    device.register_info(rs.camera_info.name, NAME)
    intrinsics = rs.intrinsics()
    intrinsics.width, intrinsics.height = width, height
    intrinsics.ppx, intrinsics.ppy = width / 2, height / 2
    intrinsics.fx = intrinsics.fy = float(width)
    intrinsics.model = rs.distortion.none
    intrinsics.coeffs = [0.0] * 5
    streams = {}
    for uid, (sensor_name, stream, pixels, bpp) in enumerate(
        [
            ("Stereo Module", rs.stream.depth, rs.format.z16, 2),
            ("RGB Camera", rs.stream.color, rs.format.rgb8, 3),
        ]
    ):
        sensor = device.add_sensor(sensor_name)
        video = rs.video_stream()
        video.type, video.index, video.uid = stream, 0, uid
        video.width, video.height, video.fps, video.bpp = width, height, fps, bpp
        video.fmt, video.intrinsics = pixels, intrinsics
        profile = sensor.add_video_stream(video, True)
        if stream == rs.stream.depth:
            sensor.add_read_only_option(rs.option.depth_units, depth_units)
        streams["depth" if stream == rs.stream.depth else "color"] = (sensor, profile)
    return device, streams


def record(
    path: Path,
    width: int,
    height: int,
    fps: int,
    frames: int,
    *,
    depth_units: float = 0.001,
    serial: str = SERIAL,
) -> Path:
    """Write `frames` frame sets at `fps` (in real time: playback keeps the recorded pace)."""
    import pyrealsense2 as rs

    device, streams = software_camera(width, height, fps, depth_units=depth_units, serial=serial)
    recorder = rs.recorder(str(path), device)
    queue = rs.frame_queue(frames * 2 + 4)
    for sensor, profile in streams.values():
        sensor.open(profile)
        sensor.start(queue)
    kept = []  # the SDK reads the pixels after on_video_frame returns
    start = time.perf_counter()
    for i in range(frames):
        for kind, pixels, bpp in (
            ("depth", depth_frame(i, height, width), 2),
            ("color", color_frame(i, height, width), 3),
        ):
            sensor, profile = streams[kind]
            frame = rs.software_video_frame()
            frame.pixels, frame.bpp, frame.stride = pixels, bpp, width * bpp
            frame.timestamp = i * 1000.0 / fps
            frame.domain = rs.timestamp_domain.hardware_clock
            frame.frame_number = i
            frame.profile = profile.as_video_stream_profile()
            sensor.on_video_frame(frame)
            kept.append(pixels)
        time.sleep(max(0.0, start + (i + 1) / fps - time.perf_counter()))
    for sensor, _ in streams.values():
        sensor.stop()
        sensor.close()
    del recorder  # closes the file
    return path


if __name__ == "__main__":
    out, w, h, rate, n = sys.argv[1:6]
    record(Path(out), int(w), int(h), int(rate), int(n))
