"""Camera configs: a tagged union on `type`, each member naming the adapter that builds it.

    --robot.cameras='{front: {type: opencv, index_or_path: 0, width: 640, height: 480, fps: 30}}'

is read as LeRobot reads it (a YAML flow mapping, so keys need no quotes); a camera is also
reachable key by key (`--robot.cameras.front.fps=15`). Importing this module is cheap: OpenCV
is imported when a camera is built. A new camera kind is one config class here (or in a plugin)
plus its adapter module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from rlctl.domain.config import (
    Register,
    converter,
    structure_values,
    tagged_union,
    type_name_of,
)
from rlctl.domain.errors import ConfigError
from rlctl.domain.network_address import check_host, check_port
from rlctl.domain.plugins import PluginKind, load_adapter

if TYPE_CHECKING:
    from rlctl.application.ports.camera import Camera

ColorMode = Literal["rgb", "bgr"]
# Files the RealSense SDK records and plays back (2.59 writes ROS2 .db3; older ones ROS1 .bag).
RECORDING_SUFFIXES = (".db3", ".bag")


@tagged_union
@attrs.frozen(kw_only=True)
class CameraConfig:
    # None: what the device gives (a robot needs width and height to declare its features).
    fps: float | None = None
    width: int | None = None
    height: int | None = None

    type_name: ClassVar[str]
    register: ClassVar[Register]
    # "package.module:factory", called with the config; imported only when a camera is built.
    adapter: ClassVar[str]

    def build(self) -> Camera:
        name = type_name_of(self) or type(self).__name__
        return load_adapter(self.adapter, part=f"camera {name}")(self)

    def frame_size(self, camera: str) -> tuple[int, int]:
        """(height, width) of the frames, as the robot's features declare them."""
        if self.width is None or self.height is None:
            raise ConfigError(
                "the camera's width and height must be given",
                where=f"cameras.{camera}",
                hint="add width and height, e.g. {width: 640, height: 480}; "
                "`rlctl find-cameras` shows what each camera offers",
            )
        rotated = getattr(self, "rotation", 0) in (90, -90, 270)
        return (self.width, self.height) if rotated else (self.height, self.width)


@CameraConfig.register("opencv")
@attrs.frozen(kw_only=True)
class OpenCVCameraConfig(CameraConfig):
    """A camera OpenCV opens: an index (0), a device (/dev/video4) or a video file."""

    adapter: ClassVar[str] = "rlctl.adapters.cameras.opencv:OpenCVCamera"

    index_or_path: int | str = 0
    color_mode: ColorMode = "rgb"
    # Degrees clockwise: 0, 90, 180 or -90 (LeRobot's values; 270 is taken as -90).
    rotation: Literal[0, 90, 180, -90, 270] = 0
    warmup_s: float = 1.0
    fourcc: str | None = None
    # OpenCV's backend id (0: any, 200: V4L2, …), as LeRobot's `Cv2Backends`.
    backend: int = 0
    # A video file: start over at its end instead of failing (a stand-in camera for demos).
    loop: bool = False

    def __attrs_post_init__(self) -> None:
        if self.fourcc is not None and len(self.fourcc) != 4:
            raise ConfigError(
                f"fourcc must be 4 characters (MJPG, YUYV), got {self.fourcc!r}",
                where="fourcc",
            )


@CameraConfig.register("zmq")
@attrs.frozen(kw_only=True)
class ZMQCameraConfig(CameraConfig):
    """Frames published over ZeroMQ as LeRobot 0.6.1's image server sends them: JSON
    `{"timestamps": {name: t}, "images": {name: base64 JPEG}}` on a PUB socket."""

    adapter: ClassVar[str] = "rlctl.adapters.cameras.zmq:ZMQCamera"

    # The publisher's host (an IP address or a name).
    server_address: str
    port: int = 5555
    # Which of the message's images is this camera's (the first one when it is not there).
    camera_name: str = "zmq_camera"
    # rgb: the frames as LeRobot's image server sends them; bgr: their channels swapped.
    color_mode: ColorMode = "rgb"
    # How long the publisher may stay silent before the camera is declared lost.
    timeout_ms: int = 5000
    warmup_s: float = 1.0

    def __attrs_post_init__(self) -> None:
        check_host(
            self.server_address, where="server_address", what="the publisher's host",
            example="{type: zmq, server_address: 192.168.1.20, port: 5555}", port_setting="port",
        )  # fmt: skip
        check_port(self.port, where="port")
        if self.timeout_ms <= 0:
            raise ConfigError(
                f"timeout_ms must be positive, got {self.timeout_ms}", where="timeout_ms"
            )


@CameraConfig.register("intelrealsense")
@attrs.frozen(kw_only=True)
class RealSenseCameraConfig(CameraConfig):
    """An Intel RealSense camera through pyrealsense2, colour and (with `use_depth`) depth, or
    depth alone (`use_rgb: false`), as LeRobot 0.6.1's `RealSenseCameraConfig`: the device by
    serial number or by its name (`Intel RealSense D435`, when only one has it), or a file the
    SDK recorded (`.db3`, `.bag`) played back as the camera it recorded. Depth comes out as
    uint16 millimetres, (H, W, 1)."""

    adapter: ClassVar[str] = "rlctl.adapters.cameras.realsense:RealSenseCamera"

    serial_number_or_name: str
    color_mode: ColorMode = "rgb"
    # The colour stream; false with use_depth: true is a depth-only camera (`<camera>_depth`).
    use_rgb: bool = True
    use_depth: bool = False
    # Degrees clockwise: 0, 90, 180 or -90 (LeRobot's values; 270 is taken as -90).
    rotation: Literal[0, 90, 180, -90, 270] = 0
    warmup_s: float = 1.0
    # A recorded file: start over at its end instead of failing (a stand-in camera for demos).
    loop: bool = False
    # The colour sensor's manual settings, in the sensor's own units (None: left as they are).
    # Exposure or gain turns auto-exposure off first, white balance auto white balance.
    exposure: int | None = None
    gain: int | None = None
    white_balance: int | None = None

    @property
    def colour_options(self) -> dict[str, int]:
        """The manual colour settings given: exposure, gain, white_balance."""
        given = {"exposure": self.exposure, "gain": self.gain, "white_balance": self.white_balance}
        return {name: value for name, value in given.items() if value is not None}

    def __attrs_post_init__(self) -> None:
        for name, value in self.colour_options.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(
                    f"{name} must be a whole number in the sensor's units, got {value!r}",
                    where=name,
                    hint=f"e.g. {name}: 100; leave it out to keep the camera's own setting",
                )
        if self.colour_options and not self.use_rgb:
            raise ConfigError(
                f"{', '.join(self.colour_options)} set the colour sensor, and use_rgb is false",
                where=", ".join(self.colour_options),
                hint="set use_rgb: true, or leave them out for a depth-only camera",
            )
        if self.colour_options and self.is_recording:
            raise ConfigError(
                f"{', '.join(self.colour_options)} cannot be set on a recording: it plays the "
                "frames as they were recorded",
                where=", ".join(self.colour_options),
                hint="leave them out to play the recording back",
            )
        if not self.serial_number_or_name.strip():
            raise ConfigError(
                "serial_number_or_name must name the camera",
                where="serial_number_or_name",
                hint="`rlctl find-cameras` lists the RealSense cameras with their serial numbers",
            )
        if not self.use_rgb and not self.use_depth:
            raise ConfigError(
                "use_rgb and use_depth are both false: the camera would give nothing",
                where="use_rgb",
                hint="use_rgb: true for colour, use_depth: true for depth (both for both)",
            )
        given = [v is not None for v in (self.fps, self.width, self.height)]
        if any(given) and not all(given):
            raise ConfigError(
                "fps, width and height are given together or not at all",
                where="fps, width, height",
                hint="e.g. {fps: 30, width: 640, height: 480}, or none of them for the "
                "camera's default profile",
            )

    @property
    def is_recording(self) -> bool:
        """Whether `serial_number_or_name` is a file the SDK recorded, not a device."""
        return self.serial_number_or_name.lower().endswith(RECORDING_SUFFIXES)


@CameraConfig.register("reachy2_camera")
@attrs.frozen(kw_only=True)
class Reachy2CameraConfig(CameraConfig):
    """A camera of Pollen Robotics' Reachy 2 through its video server (gRPC), as LeRobot 0.6.1's
    `reachy2_camera`: `name` teleop (the head's stereo pair, `image_type` left or right) or depth
    (the torso's RGB-D camera, `image_type` rgb). Frames are resized to width x height."""

    adapter: ClassVar[str] = "rlctl.adapters.cameras.reachy2:Reachy2Camera"

    # teleop (the head's stereo pair) or depth (the torso's RGB-D camera).
    name: str
    # left or right for teleop, rgb for depth.
    image_type: str
    color_mode: ColorMode = "rgb"
    # The robot's address on the network.
    ip_address: str | None = "localhost"
    # The robot's video server's port.
    port: int = 50065
    width: int | None = 640
    height: int | None = 480
    fps: float | None = 30.0
    # rlctl's: how long one frame request may take.
    timeout_s: float = 1.0

    def __attrs_post_init__(self) -> None:
        views = {"teleop": ("left", "right"), "depth": ("rgb",)}
        if self.name not in views:
            raise ConfigError(
                f"name must be teleop or depth, got {self.name!r}",
                where="name",
                hint="teleop: the head's stereo camera; depth: the torso's RGB-D camera",
            )
        if self.image_type not in views[self.name]:
            depth_note = (
                " (depth frames are not supported, as in LeRobot)" if self.name == "depth" else ""
            )
            raise ConfigError(
                f"image_type of the {self.name} camera must be "
                f"{' or '.join(views[self.name])}, got {self.image_type!r}{depth_note}",
                where="image_type",
            )
        check_host(
            self.ip_address or "", where="ip_address", what="the robot", example="192.168.1.42",
            port_setting="port",
        )  # fmt: skip
        check_port(self.port, where="port")
        if not (self.width and self.height and self.width > 0 and self.height > 0):
            raise ConfigError("width and height must be positive", where="width, height")
        if not 0 < self.timeout_s < float("inf"):
            raise ConfigError(
                f"timeout_s must be positive, got {self.timeout_s}", where="timeout_s"
            )


@CameraConfig.register("synthetic")
@attrs.frozen(kw_only=True)
class SyntheticCameraConfig(CameraConfig):
    """A moving gradient at `fps`, for dry runs and benchmarks; no device needed."""

    adapter: ClassVar[str] = "rlctl.adapters.memory.camera:synthetic_camera"

    fps: float | None = 30.0
    width: int | None = 640
    height: int | None = 480
    threaded: bool = True
    stop_after: int | None = None


def _structure_cameras(data: Any, _: type) -> dict[str, CameraConfig]:
    if isinstance(data, str):
        import yaml

        try:
            data = yaml.safe_load(data)
        except yaml.YAMLError as error:
            raise ConfigError(
                f"cannot read the cameras as a mapping: {error}",
                where="cameras",
                hint="write them as {front: {type: opencv, index_or_path: 0, width: 640, "
                "height: 480, fps: 30}}",
            ) from error
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"cameras must map names to camera settings, got {type(data).__name__}",
            where="cameras",
        )
    return structure_values(data, CameraConfig)


def _structure_index_or_path(data: Any, _: type) -> int | str:
    if isinstance(data, bool) or not isinstance(data, int | str):
        raise ConfigError(
            f"expected a camera index (0) or a path (/dev/video0, a video file), got {data!r}",
            where="index_or_path",
        )
    return int(data) if isinstance(data, str) and data.strip().isdigit() else data


converter.register_structure_hook_func(lambda t: t == dict[str, CameraConfig], _structure_cameras)
converter.register_structure_hook_func(lambda t: t == int | str, _structure_index_or_path)


# Every camera type: the ones above and the `rlctl.cameras` entry points of installed packages
# (rlctl's own are declared there too, in adapters/pyproject.toml).
CAMERA_TYPES = PluginKind(CameraConfig, "rlctl.cameras", (), noun="camera")


def build_cameras(configs: Mapping[str, CameraConfig]) -> dict[str, Camera]:
    return {name: config.build() for name, config in configs.items()}
