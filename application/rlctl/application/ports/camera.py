"""Cameras: a background capture that always holds the latest frame.

A camera captures on its own thread (or process) at its own rate; the control loop never waits
for the sensor, it takes the newest frame there is. Frames are uint8 `(height, width, 3)` in
the camera's colour order (RGB unless configured otherwise), after rotation, so `height` and
`width` describe what `read` returns. A camera that cannot open, or stops delivering, raises
`rlctl.domain.errors.HardwareError` naming the device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np


class Camera(Protocol):
    @property
    def name(self) -> str:
        """Where the frames come from (`/dev/video0`, `synthetic 640x480`), for messages."""
        ...

    @property
    def height(self) -> int: ...

    @property
    def width(self) -> int: ...

    @property
    def fps(self) -> float: ...

    @property
    def is_connected(self) -> bool: ...

    def connect(self) -> None:
        """Open the device and start capturing; returns once a first frame has arrived."""
        ...

    def read(self) -> np.ndarray:
        """Wait for a frame captured after this call began, and return it."""
        ...

    def async_read(self, timeout_s: float = 0.2) -> np.ndarray:
        """The newest frame not yet returned, waiting up to `timeout_s` for one to arrive.

        Raises `HardwareError` when none arrives in time (the camera stopped delivering).
        """
        ...

    def read_latest(self, max_age_s: float = 0.5) -> np.ndarray:
        """The newest frame, returned again if nothing newer came; never waits for a fresh one.

        What a control loop calls: a frame is at most one camera period old. When the newest
        frame is older than `max_age_s`, waits up to `max_age_s` more for a newer one (a
        capture starved for a moment), then raises `HardwareError` (the camera stopped).
        """
        ...

    def disconnect(self) -> None:
        """Stop capturing and release the device; safe to call twice."""
        ...
