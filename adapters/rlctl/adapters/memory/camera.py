"""A camera with no device: a moving colour gradient, numbered frame by frame.

Threaded (the default), it behaves like a real camera: frames arrive on their own thread at
`fps` and the loop takes the newest, so it exercises the same timing as hardware. Unthreaded,
every read makes the next frame at once, for deterministic tests. `stop_after` makes it stop
delivering after that many frames, as an unplugged camera does. Frame k carries k in its first
pixels (`frame_number`), so a test can tell which frame was stored.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from rlctl.adapters.cameras.capture_thread import CaptureThreadCamera
from rlctl.domain.errors import HardwareError, InvalidInput

if TYPE_CHECKING:
    from rlctl.adapters.cameras.config import SyntheticCameraConfig

_SHIFT_PER_FRAME = 4  # pixels the gradient moves each frame


def _gradient(height: int, width: int) -> np.ndarray:
    x = np.linspace(0, 255, width, dtype=np.float32)
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[..., 0] = x[None, :]
    image[..., 1] = y
    image[..., 2] = (x[None, :] + y) / 2
    return image


def frame_number(frame: np.ndarray) -> int:
    """The number a synthetic frame carries (its first three pixels, base 256)."""
    digits = frame[0, :3, 0].astype(np.int64)
    return int(digits[0] * 65536 + digits[1] * 256 + digits[2])


class SyntheticCamera(CaptureThreadCamera):
    def __init__(
        self,
        width: int = 640,
        height: int = 480,
        fps: float = 30.0,
        *,
        threaded: bool = True,
        stop_after: int | None = None,
        label: str = "synthetic",
    ) -> None:
        super().__init__(first_frame_timeout_s=max(2.0, 5.0 / fps))
        if width <= 0 or height <= 0 or fps <= 0:
            raise InvalidInput(
                f"a synthetic camera needs a positive size and fps, got {width}x{height} @ {fps}",
                where=label,
            )
        self._width, self._height, self._fps = int(width), int(height), float(fps)
        self._threaded = threaded
        self._stop_after = stop_after
        self._label = label
        self._base = _gradient(self._height, self._width)
        self._count = 0
        self._next_due = 0.0
        self._open_now = False
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"{self._label} {self._width}x{self._height}@{self._fps:g}"

    @property
    def height(self) -> int:
        return self._height

    @property
    def width(self) -> int:
        return self._width

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def frames_made(self) -> int:
        return self._count

    # Unthreaded: every read makes the next frame.

    @property
    def is_connected(self) -> bool:
        return super().is_connected if self._threaded else self._open_now

    def connect(self) -> None:
        if self._threaded:
            super().connect()
        else:
            self._open()

    def read(self) -> np.ndarray:
        return super().read() if self._threaded else self._next_frame()

    def async_read(self, timeout_s: float = 0.2, *, newer_than: int | None = None) -> np.ndarray:
        if self._threaded:
            return super().async_read(timeout_s, newer_than=newer_than)
        return self._next_frame()

    def read_latest(self, max_age_s: float = 0.5) -> np.ndarray:
        return super().read_latest(max_age_s) if self._threaded else self._next_frame()

    def disconnect(self) -> None:
        if self._threaded:
            super().disconnect()
        else:
            self._close()

    def _next_frame(self) -> np.ndarray:
        if not self._open_now:
            raise HardwareError("the camera is not connected", where=self.name)
        frame = self._make()
        if frame is None:
            raise HardwareError(
                f"stopped delivering after {self._stop_after} frames", where=self.name
            )
        return frame

    # The source

    def _open(self) -> None:
        self._count = 0
        self._next_due = time.perf_counter()
        self._open_now = True

    def _grab(self) -> np.ndarray | None:
        delay = self._next_due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        self._next_due = max(self._next_due + 1.0 / self._fps, time.perf_counter() - 1.0)
        frame = self._make()
        if frame is None:
            # An unplugged camera goes quiet rather than ending: readers see frames age.
            while not self._stop.wait(0.05):
                pass
        return frame

    def _close(self) -> None:
        self._open_now = False

    def _make(self) -> np.ndarray | None:
        with self._lock:
            if self._stop_after is not None and self._count >= self._stop_after:
                return None
            k = self._count
            self._count += 1
        frame = np.roll(self._base, (k * _SHIFT_PER_FRAME) % self._width, axis=1)
        frame[0, :3, 0] = [(k >> 16) & 255, (k >> 8) & 255, k & 255]
        return frame


def synthetic_camera(config: SyntheticCameraConfig) -> SyntheticCamera:
    """The factory `--robot.cameras='{front: {type: synthetic}}'` resolves to."""
    return SyntheticCamera(
        width=config.width or 640,
        height=config.height or 480,
        fps=config.fps or 30.0,
        threaded=config.threaded,
        stop_after=config.stop_after,
    )
