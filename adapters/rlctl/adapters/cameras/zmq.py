"""`--robot.cameras={head: {type: zmq, server_address: 192.168.1.20, port: 5555}}`: frames from a
ZeroMQ publisher, as LeRobot 0.6.1's `ZMQCamera` reads its image server.

Each message is JSON, `{"timestamps": {name: t}, "images": {name: "<base64 JPEG>"}}`; this camera
takes the image named `camera_name` (a server that has only ever sent one other name is taken to
be a one-camera server, as LeRobot does). A message without this camera's image (the server had no
new frame, or sent another camera's) is skipped. Unlike LeRobot's camera, which keeps only the
newest message (ZMQ's CONFLATE), each read takes every message waiting and decodes the newest that
carries this camera's image: a server interleaving image-less or other cameras' messages cannot
starve it. A publisher silent for `timeout_ms` is a lost camera: the capture stops and
every read raises one `HardwareError` naming the camera and its address.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from typing import Any

import numpy as np

from rlctl.adapters.cameras.capture_thread import CameraLost, CaptureThreadCamera
from rlctl.adapters.cameras.config import ZMQCameraConfig
from rlctl.domain.errors import HardwareError, NotSupported

_POLL_S = 0.1  # how often a waiting capture looks at its stop flag
# Messages waiting in the socket at most: a capture slower than the publisher drops frames, never
# grows memory (ZMQ drops beyond the high-water mark).
_QUEUE = 16


def _zmq() -> Any:
    try:
        import zmq
    except ImportError as error:
        raise NotSupported(
            "pyzmq is not installed",
            where="zmq camera",
            hint="pip install 'rlctl[zmq]'",
        ) from error
    return zmq


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as error:
        raise NotSupported(
            "OpenCV is not installed (it decodes the published JPEGs)",
            where="zmq camera",
            hint="pip install 'rlctl[cameras]'",
        ) from error
    return cv2


class ZMQCamera(CaptureThreadCamera):
    def __init__(self, config: ZMQCameraConfig) -> None:
        timeout_s = config.timeout_ms / 1000
        super().__init__(first_frame_timeout_s=max(timeout_s, config.warmup_s))
        self.config = config
        self._timeout_s = timeout_s
        self._address = f"tcp://{config.server_address}:{config.port}"
        self._context: Any = None
        self._socket: Any = None
        self._size: tuple[int, int] | None = (
            (config.height, config.width)
            if config.height is not None and config.width is not None
            else None
        )
        self._names_seen: set[str] = set()

    @property
    def name(self) -> str:
        return f"zmq {self.config.camera_name}@{self.config.server_address}:{self.config.port}"

    @property
    def height(self) -> int:
        return self._known_size()[0]

    @property
    def width(self) -> int:
        return self._known_size()[1]

    @property
    def fps(self) -> float:
        return float(self.config.fps or 0.0)

    def _hint(self) -> str:
        return (
            f"check that the publisher runs and is reachable at {self._address} (LeRobot's "
            "image server, or a LeKiwi host), the server_address and port, and any firewall "
            "between"
        )

    def _known_size(self) -> tuple[int, int]:
        if self._size is None:
            raise HardwareError(
                "the frame size is known once a frame has arrived",
                where=self.name,
                hint="give width and height, or connect the camera first",
            )
        return self._size

    # The source

    def _open(self) -> None:
        zmq = _zmq()
        _cv2()
        self._names_seen.clear()
        self._context = zmq.Context()
        socket = self._context.socket(zmq.SUB)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt_string(zmq.SUBSCRIBE, "")
        socket.setsockopt(zmq.RCVHWM, _QUEUE)
        try:
            socket.connect(self._address)
        except zmq.ZMQError as error:
            socket.close()
            self._context.term()
            self._context = None
            raise HardwareError(
                f"cannot connect to {self._address}: {error}",
                where=self.name,
                hint="server_address is a host name or an IP address, port a number in 1..65535",
            ) from error
        self._socket = socket

    def _grab(self) -> np.ndarray | None:
        zmq = _zmq()
        deadline = time.monotonic() + self._timeout_s
        while True:
            if self._stop.is_set():
                raise InterruptedError("capture stopped")
            left = deadline - time.monotonic()
            if left <= 0:
                raise CameraLost(
                    f"no frame from the publisher at {self._address} for "
                    f"{self.config.timeout_ms} ms: it stopped or the network dropped",
                    where=self.name,
                    hint=self._hint(),
                )
            if not self._socket.poll(int(min(left, _POLL_S) * 1000), zmq.POLLIN):
                continue
            encoded = None
            for _ in range(_QUEUE * 2):  # bounded: a fast publisher cannot hold the read forever
                try:
                    message = self._socket.recv_string(zmq.NOBLOCK)
                except zmq.Again:
                    break
                encoded = self._image_of(message) or encoded
            if encoded is not None:
                return self._decode(encoded)

    def _image_of(self, message: str) -> str | None:
        """This camera's base64 image in a message, or None when it carries none."""
        try:
            data = json.loads(message)
        except json.JSONDecodeError as error:
            raise HardwareError(f"a message that is not JSON ({error})", where=self.name) from error
        images = data.get("images") if isinstance(data, dict) else None
        if not isinstance(images, dict):
            raise HardwareError("a message without an 'images' mapping", where=self.name)
        self._names_seen.update(images)
        wanted = self.config.camera_name
        if wanted in images:
            encoded = images[wanted]
        elif wanted not in self._names_seen and len(self._names_seen) == 1 and images:
            encoded = next(iter(images.values()))
        else:
            return None  # no new frame of this camera in this message
        if not isinstance(encoded, str):
            raise HardwareError("an image that is not a base64 string", where=self.name)
        return encoded

    def _decode(self, encoded: str) -> np.ndarray:
        cv2 = _cv2()
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, TypeError) as error:
            raise HardwareError(
                f"an image that is not base64 ({error})", where=self.name
            ) from error
        frame = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
        if frame is None:
            raise HardwareError("an image that is not a JPEG OpenCV can decode", where=self.name)
        if self._size is None:
            self._size = (int(frame.shape[0]), int(frame.shape[1]))
        elif frame.shape[:2] != self._size:
            raise HardwareError(
                f"a frame is {frame.shape[1]}x{frame.shape[0]}, the camera was configured as "
                f"{self._size[1]}x{self._size[0]}",
                where=self.name,
                hint="give the width and height the publisher sends",
            )
        if self.config.color_mode == "bgr":
            frame = np.ascontiguousarray(frame[..., ::-1])
        return frame

    def _close(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            socket.close(linger=0)
        context, self._context = self._context, None
        if context is not None:
            context.term()

    def connect(self) -> None:
        super().connect()
        if self.config.warmup_s > 0:
            time.sleep(self.config.warmup_s)
            self.read_latest(max_age_s=max(1.0, self._timeout_s))
