"""`rlctl find-cameras`: every camera rlctl can open, of every kind.

OpenCV's devices; Intel RealSense devices when pyrealsense2 is installed; and, given their
addresses, the cameras ZeroMQ publishers send (LeRobot's image-server messages: one entry per
image name). What could not be looked at is said in a note rather than hidden.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Sequence

import attrs

from rlctl.domain.errors import InvalidInput


@attrs.frozen
class FoundCamera:
    """`kind` is the camera type to configure (`opencv`, `intelrealsense`, `zmq`); `settings`
    what to put in the camera's config to open this one."""

    kind: str
    id: str
    width: int
    height: int
    fps: float
    detail: str
    settings: dict[str, object] = attrs.field(factory=dict)


@attrs.frozen
class Discovery:
    cameras: list[FoundCamera]
    notes: list[str]


def parse_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise InvalidInput(
            f"{address!r} is not HOST:PORT",
            where="--zmq",
            hint="e.g. --zmq=192.168.1.20:5555 (the publisher's address and port)",
        )
    return host, int(port)


def find_all(zmq_addresses: Sequence[str] = (), *, zmq_timeout_s: float = 2.0) -> Discovery:
    addresses = [parse_address(a) for a in zmq_addresses]  # bad input fails before any looking
    cameras: list[FoundCamera] = []
    notes: list[str] = []
    _opencv(cameras, notes)
    _realsense(cameras, notes)
    for host, port in addresses:
        _zmq(host, port, zmq_timeout_s, cameras, notes)
    return Discovery(cameras, notes)


def _opencv(cameras: list[FoundCamera], notes: list[str]) -> None:
    from rlctl.adapters.cameras import opencv
    from rlctl.domain.errors import NotSupported

    try:
        found = opencv.find_cameras()
    except NotSupported as error:
        notes.append(f"opencv: not looked for, {error.message} ({error.hint})")
        return
    for info in found:
        cameras.append(
            FoundCamera(
                "opencv",
                str(info.id),
                info.width,
                info.height,
                info.fps,
                f"{info.fourcc.strip() or '?'} ({info.backend})",
                {"index_or_path": info.id},
            )
        )


def _realsense(cameras: list[FoundCamera], notes: list[str]) -> None:
    from rlctl.adapters.cameras import realsense
    from rlctl.domain.errors import NotSupported

    try:
        rs = realsense._rs()
    except NotSupported:
        notes.append("intelrealsense: not looked for, pyrealsense2 is not installed")
        return
    try:
        devices = list(realsense.context().query_devices())
    except RuntimeError as error:
        notes.append(f"intelrealsense: the SDK could not list devices ({error})")
        return
    for device in devices:
        serial = device.get_info(rs.camera_info.serial_number)
        name = device.get_info(rs.camera_info.name)
        width = height = 0
        fps = 0.0
        depth = False
        for sensor in device.query_sensors():
            for profile in sensor.get_stream_profiles():
                if not (profile.is_video_stream_profile() and profile.is_default()):
                    continue
                if profile.stream_type() == rs.stream.depth:
                    depth = True
                elif profile.stream_type() == rs.stream.color:
                    video = profile.as_video_stream_profile()
                    width, height, fps = video.width(), video.height(), float(video.fps())
        cameras.append(
            FoundCamera(
                "intelrealsense",
                serial,
                width,
                height,
                fps,
                f"{name}, colour{' and depth' if depth else ''}",
                {"serial_number_or_name": serial},
            )
        )


def _zmq(
    host: str, port: int, timeout_s: float, cameras: list[FoundCamera], notes: list[str]
) -> None:
    try:
        import zmq
    except ImportError:
        notes.append(f"zmq {host}:{port}: not looked at, pyzmq is not installed")
        return
    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt_string(zmq.SUBSCRIBE, "")
    seen: dict[str, tuple[int, int]] = {}
    try:
        socket.connect(f"tcp://{host}:{port}")
        # A server sends only the cameras with a new frame: after the first image, listen a
        # little longer for the others.
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0 and socket.poll(int(left * 1000)):
            found = _sizes(socket.recv_string())
            if found and not seen:
                deadline = min(deadline, time.monotonic() + 0.3)
            for name, size in found.items():
                seen.setdefault(name, size)
    except zmq.ZMQError as error:
        notes.append(f"zmq {host}:{port}: {error}")
    finally:
        socket.close(linger=0)
        context.term()
    if not seen:
        notes.append(f"zmq {host}:{port}: no images published within {timeout_s:g} s")
    for name, (height, width) in seen.items():
        cameras.append(
            FoundCamera(
                "zmq",
                f"{name}@{host}:{port}",
                width,
                height,
                0.0,
                "JPEG over ZeroMQ",
                {"server_address": host, "port": port, "camera_name": name},
            )
        )


def _sizes(message: str) -> dict[str, tuple[int, int]]:
    try:
        import cv2
        import numpy as np
    except ImportError:
        return {}
    try:
        images = json.loads(message).get("images", {})
    except (json.JSONDecodeError, AttributeError):
        return {}
    sizes = {}
    for name, encoded in images.items() if isinstance(images, dict) else ():
        try:
            raw = base64.b64decode(encoded)
        except (ValueError, TypeError):
            continue
        frame = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
        if frame is not None:
            sizes[str(name)] = (int(frame.shape[0]), int(frame.shape[1]))
    return sizes
