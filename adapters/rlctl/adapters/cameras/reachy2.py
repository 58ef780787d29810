"""`{type: reachy2_camera}`: a camera of Pollen Robotics' Reachy 2 through its video server
(gRPC, `VideoService`), as LeRobot 0.6.1's `Reachy2Camera` reads it through `reachy2_sdk`.

The server lists its cameras (`GetAvailableCameras`: `teleop_head`, the head's stereo pair;
`depth_camera`, the torso's RGB-D one) and sends each view as a JPEG (`GetFrame`). A frame is
decoded, resized to width x height with OpenCV's area interpolation (the SDK's `size`) and
turned from OpenCV's BGR to RGB unless `color_mode: bgr`. The capture thread asks at `fps`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rlctl.adapters.cameras.capture_thread import CaptureThreadCamera
from rlctl.adapters.cameras.config import Reachy2CameraConfig
from rlctl.adapters.cameras.picture_header import MAX_PICTURE_SIDE, picture_size
from rlctl.domain.errors import HardwareError, NotSupported

# The video server's camera names (pollen-vision's) and views (the API's `View` enum).
SERVER_NAMES = {"teleop": "teleop_head", "depth": "depth_camera"}
VIEWS = {"left": "LEFT", "right": "RIGHT", "rgb": "LEFT"}
# A frame larger than this is refused before it is decoded.
MAX_FRAME_BYTES = 32 * 1024 * 1024


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as error:
        raise NotSupported(
            "OpenCV is not installed: Reachy 2's frames are decoded with it",
            where="reachy2_camera",
            hint="pip install 'rlctl[reachy2]'",
        ) from error
    return cv2


class Reachy2Camera(CaptureThreadCamera):
    def __init__(self, config: Reachy2CameraConfig) -> None:
        super().__init__(first_frame_timeout_s=max(2.0, 3 * config.timeout_s))
        self.config = config
        self._channel: Any = None
        self._stub: Any = None
        self._request: Any = None
        self._next_at = 0.0

    @property
    def name(self) -> str:
        c = self.config
        return f"reachy2_camera {c.name} {c.image_type} at {c.ip_address}:{c.port}"

    @property
    def height(self) -> int:
        assert self.config.height is not None
        return self.config.height

    @property
    def width(self) -> int:
        assert self.config.width is not None
        return self.config.width

    @property
    def fps(self) -> float:
        return float(self.config.fps or 30.0)

    def _hint(self) -> str:
        return (
            f"check the robot's video server answers at {self.config.ip_address}:"
            f"{self.config.port} (robot.port / the camera's port: 50065 by default)"
        )

    def _open(self) -> None:
        _cv2()
        import grpc
        from google.protobuf.empty_pb2 import Empty

        from rlctl.adapters.robots.reachy2_api import video_pb2, video_pb2_grpc
        from rlctl.adapters.robots.reachy2_link import rpc_reason

        config = self.config
        self._channel = grpc.insecure_channel(f"{config.ip_address}:{config.port}")
        self._stub = video_pb2_grpc.VideoServiceStub(self._channel)
        try:
            cameras = self._stub.GetAvailableCameras(Empty(), timeout=config.timeout_s * 3)
        except grpc.RpcError as error:
            self._close()
            raise HardwareError(
                f"no Reachy 2 video server answering at {config.ip_address}:{config.port}: "
                f"{rpc_reason(error)}",
                where=self.name,
                hint=self._hint(),
            ) from error
        wanted = SERVER_NAMES[config.name]
        found = [c for c in cameras.camera_feat if c.name == wanted]
        if not found:
            self._close()
            listed = ", ".join(c.name for c in cameras.camera_feat) or "none"
            raise HardwareError(
                f"the Reachy 2 at {config.ip_address}:{config.port} has no {config.name} camera "
                f"({wanted}; it lists {listed})",
                where=self.name,
                hint="check the robot's camera services (its dashboard), or leave this camera out",
            )
        self._request = video_pb2.ViewRequest(camera_feat=found[0], view=VIEWS[config.image_type])
        self._next_at = 0.0

    def _grab(self) -> np.ndarray:
        cv2 = _cv2()
        wait = self._next_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._next_at = time.monotonic() + 1.0 / self.fps
        frame = self._stub.GetFrame(self._request, timeout=self.config.timeout_s)
        data = frame.data
        if not data:
            raise ValueError("an empty frame")
        if len(data) > MAX_FRAME_BYTES:
            raise ValueError(f"a frame over {MAX_FRAME_BYTES // 2**20} MiB")
        size = picture_size(data)
        if size is None:
            raise ValueError("a frame that is not a JPEG or PNG picture")
        if not (0 < size[0] <= MAX_PICTURE_SIDE and 0 < size[1] <= MAX_PICTURE_SIDE):
            # A broken or hostile server could claim any size in a small file.
            raise ValueError(f"a frame claiming {size[0]}x{size[1]} pixels")
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError("a frame that does not decode")
        if image.shape[:2] != (self.height, self.width):
            image = cv2.resize(image, (self.width, self.height), interpolation=cv2.INTER_AREA)
        if self.config.color_mode == "rgb":
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return np.ascontiguousarray(image)

    def _grab_timeout_s(self) -> float:
        return self.config.timeout_s

    def _close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
