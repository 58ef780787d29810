"""The plugin's configs: pure data, imported by `rlctl --help` and the settings, never the device
library. Each names the adapter that builds it, imported only when the part is built."""

from __future__ import annotations

from typing import ClassVar

import attrs

from rlctl.adapters.cameras.config import CameraConfig
from rlctl.adapters.robots.config import RobotConfig


@attrs.frozen(kw_only=True)
class ToyRobotConfig(RobotConfig):
    """A pan-tilt head: two joints in degrees, each within +-`limit_deg`."""

    adapter: ClassVar[str] = "rlctl_toy_robot.robot:toy_robot"

    limit_deg: float = 90.0
    # Caps each joint's step, as LeRobot's arms do.
    max_relative_target: float | None = None
    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)
    # Fail on this observation (1-based): a device that stops answering mid-recording.
    fail_at: int | None = None


@attrs.frozen(kw_only=True)
class ToyCardCameraConfig(CameraConfig):
    """A camera that paints a test card whose brightness counts the frames."""

    adapter: ClassVar[str] = "rlctl_toy_robot.robot:ToyCardCamera"

    fps: float | None = 30.0
    width: int | None = 32
    height: int | None = 24
