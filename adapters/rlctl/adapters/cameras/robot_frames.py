"""The frames a robot's cameras give it: their dataset features and the newest frames.

A camera that gives depth beside colour (a RealSense with `use_depth`) adds
`observation.images.<camera>_depth` after its colour feature, and a depth-only one
(`use_rgb: false`) has that feature alone, as LeRobot's robots declare them, asked the way they
ask (`camera.use_rgb`, `camera.use_depth`). An error of a camera is said with its name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rlctl.application.ports.camera import Camera
from rlctl.application.robot_features import (
    DEPTH_SUFFIX,
    IMAGES_PREFIX,
    camera_feature,
    depth_feature,
)
from rlctl.domain.errors import HardwareError, RlctlError
from rlctl.domain.features import FeatureSpec


def gives_depth(camera: Camera) -> bool:
    """Whether a camera delivers depth beside colour (a RealSense with `use_depth`, which then
    has `read_latest_with_depth`), asked as LeRobot's robots ask it."""
    return bool(getattr(camera, "use_depth", False))


def gives_color(camera: Camera) -> bool:
    """Whether a camera delivers colour (all do but a depth-only RealSense), as LeRobot asks."""
    return bool(getattr(camera, "use_rgb", True))


def camera_features(
    cameras: Mapping[str, Camera], sizes: Mapping[str, tuple[int, int]]
) -> dict[str, FeatureSpec]:
    """Each camera's feature at its declared (height, width), and its depth feature after it
    when it gives depth (LeRobot's order)."""
    features = {}
    for name, camera in cameras.items():
        height, width = sizes[name]
        specs = [camera_feature(name, height, width)] if gives_color(camera) else []
        if gives_depth(camera):
            specs.append(depth_feature(name, height, width))
        for spec in specs:
            features[spec.key] = spec
    return features


def read_cameras(cameras: Mapping[str, Camera]) -> dict[str, Any]:
    """The newest frame of every camera (and its depth), under the keys `camera_features`
    declares; a camera that fails is named in the error."""
    frames: dict[str, Any] = {}
    for name, camera in cameras.items():
        try:
            if not gives_color(camera):
                depth = camera.read_latest_depth()  # type: ignore[attr-defined]
                frames[f"{IMAGES_PREFIX}{name}{DEPTH_SUFFIX}"] = depth
            elif gives_depth(camera):
                # Colour and depth of one frame set (LeRobot reads them apart).
                color, depth = camera.read_latest_with_depth()  # type: ignore[attr-defined]
                frames[f"{IMAGES_PREFIX}{name}"] = color
                frames[f"{IMAGES_PREFIX}{name}{DEPTH_SUFFIX}"] = depth
            else:
                frames[f"{IMAGES_PREFIX}{name}"] = camera.read_latest()
        except RlctlError as error:
            raise located(error, f"camera {name!r}") from error
    return frames


def located(error: RlctlError, place: str) -> RlctlError:
    """The same error with `place` (the camera's name, the arm's side) before its `where`:
    `camera 'front', /dev/video0`. Said once, however often it is passed up."""
    if (error.where or "").startswith(place):
        return error
    copy = type(error).__new__(type(error))
    where = f"{place}, {error.where}" if error.where else place
    RlctlError.__init__(copy, error.message, where=where, hint=error.hint)
    return copy


def check_frame_sizes(cameras: Mapping[str, Camera], sizes: Mapping[str, tuple[int, int]]) -> None:
    """Refuse a connected camera whose frames are not the (height, width) declared for it."""
    for name, camera in cameras.items():
        expected = sizes[name]
        if (camera.height, camera.width) != expected:
            raise HardwareError(
                f"camera {name!r} gives {camera.width}x{camera.height} frames, the robot "
                f"declares {expected[1]}x{expected[0]}",
                where=camera.name,
                hint="set the camera's width and height to what it delivers",
            )


def connect_cameras(
    cameras: Mapping[str, Camera],
    sizes: Mapping[str, tuple[int, int]],
    *,
    release: Callable[[], None],
) -> None:
    """Connect a robot's cameras once its motors are and check their frame sizes; on any
    failure `release` (the robot's disconnect: torque off, devices closed) runs first."""
    try:
        for camera in cameras.values():
            camera.connect()
        check_frame_sizes(cameras, sizes)
    except BaseException:
        release()
        raise
