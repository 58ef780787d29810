"""Cameras through OpenCV: a device index, a `/dev/videoN` path, or a video file.

Frames are captured on a background thread (see `capture_thread`); the loop takes the newest.
Settings follow LeRobot's `OpenCVCamera`: fourcc first (it changes which sizes and rates are
offered), then size and rate, each checked against what the device reports; frames come out
RGB (or BGR) and rotated. A video file plays at its own rate (or `fps`) like a live camera and,
with `loop`, starts over at its end. Everything that goes wrong is a `HardwareError` naming the
source and what to do.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from rlctl.adapters.cameras.capture_thread import CaptureThreadCamera
from rlctl.adapters.cameras.config import OpenCVCameraConfig
from rlctl.domain.errors import HardwareError, NotSupported

MAX_INDEX_SCANNED = 60  # where no /dev/video* exists, indices 0..59 are tried, as LeRobot does


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as error:
        raise NotSupported(
            "OpenCV is not installed, so cameras cannot be opened",
            hint="install it: pip install 'rlctl[cameras]' (opencv-python-headless)",
        ) from error
    return cv2


def _source(index_or_path: int | str) -> int | str:
    if isinstance(index_or_path, str) and index_or_path.strip().isdigit():
        return int(index_or_path)
    return index_or_path


def _is_file(source: int | str) -> bool:
    return isinstance(source, str) and not source.startswith("/dev/") and Path(source).is_file()


def _fourcc_text(code: float) -> str:
    value = int(code)
    return "".join(chr((value >> 8 * i) & 0xFF) for i in range(4))


class OpenCVCamera(CaptureThreadCamera):
    def __init__(self, config: OpenCVCameraConfig) -> None:
        super().__init__()
        self.config = config
        self._source = _source(config.index_or_path)
        self._is_file = _is_file(self._source)
        self._capture_device: Any = None
        self._rotate: int | None = None
        self._size: tuple[int, int] | None = None  # (height, width) as captured, before rotation
        self._fps = float(config.fps) if config.fps else 0.0
        self._next_due = 0.0

    @property
    def name(self) -> str:
        return f"opencv {self._source}"

    @property
    def height(self) -> int:
        return self._final_size()[0]

    @property
    def width(self) -> int:
        return self._final_size()[1]

    @property
    def fps(self) -> float:
        return self._fps

    def connect(self) -> None:
        super().connect()
        if self.config.warmup_s > 0 and not self._is_file:
            # Auto exposure and white balance settle while the thread keeps capturing.
            time.sleep(self.config.warmup_s)
            self.read_latest(max_age_s=max(1.0, self.config.warmup_s))

    # The source

    def _open(self) -> None:
        cv2 = _cv2()
        if isinstance(self._source, str) and not self._is_file and not Path(self._source).exists():
            raise HardwareError(
                "no such device or video file",
                where=self.name,
                hint="`rlctl find-cameras` lists the cameras OpenCV can open",
            )
        cv2.setNumThreads(1)
        capture = cv2.VideoCapture(self._source, self.config.backend)
        if not capture.isOpened():
            capture.release()
            raise HardwareError(
                "OpenCV cannot open this camera",
                where=self.name,
                hint="check it is plugged in and not used by another program; "
                "`rlctl find-cameras` lists the cameras OpenCV can open",
            )
        self._capture_device = capture
        try:
            self._configure(cv2, capture)
        except BaseException:
            self._close()
            raise
        self._rotate = {
            90: cv2.ROTATE_90_CLOCKWISE,
            180: cv2.ROTATE_180,
            -90: cv2.ROTATE_90_COUNTERCLOCKWISE,
            270: cv2.ROTATE_90_COUNTERCLOCKWISE,
        }.get(self.config.rotation)
        self._next_due = time.perf_counter()

    def _configure(self, cv2: Any, capture: Any) -> None:
        config = self.config
        if config.fourcc and not self._is_file:
            capture.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter_fourcc(*config.fourcc))
        wanted = self._captured_size()
        if wanted is not None and not self._is_file:
            capture.set(cv2.CAP_PROP_FRAME_WIDTH, float(wanted[1]))
            capture.set(cv2.CAP_PROP_FRAME_HEIGHT, float(wanted[0]))
        actual = (
            round(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            round(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
        )
        if wanted is not None and actual != wanted:
            raise HardwareError(
                f"frames are {actual[1]}x{actual[0]}, not the {wanted[1]}x{wanted[0]} configured",
                where=self.name,
                hint="set width and height to a size the camera offers (`rlctl find-cameras`)",
            )
        self._size = actual
        reported = float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
        if config.fps and not self._is_file:
            capture.set(cv2.CAP_PROP_FPS, float(config.fps))
            reported = float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
            if not math.isclose(reported, float(config.fps), rel_tol=1e-3):
                raise HardwareError(
                    f"the camera runs at {reported:g} fps, not the {config.fps:g} configured",
                    where=self.name,
                    hint="set fps to a rate the camera offers (`rlctl find-cameras`)",
                )
        self._fps = float(config.fps or reported or 30.0)

    def _captured_size(self) -> tuple[int, int] | None:
        if self.config.width is None or self.config.height is None:
            return None
        height, width = self.config.height, self.config.width
        # Configured sizes are after rotation; a quarter turn swaps what the sensor captures.
        return (width, height) if self.config.rotation in (90, -90, 270) else (height, width)

    def _grab(self) -> np.ndarray | None:
        capture = self._capture_device
        if self._is_file:
            # A file reads as fast as it decodes; pace it like the camera it stands in for.
            delay = self._next_due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            self._next_due = max(self._next_due + 1.0 / self._fps, time.perf_counter() - 1.0)
        ok, frame = capture.read()
        if not ok and self._is_file and self.config.loop:
            capture.set(_cv2().CAP_PROP_POS_FRAMES, 0)
            ok, frame = capture.read()
        if not ok:
            if self._is_file:
                return None
            raise HardwareError("the camera returned no frame", where=self.name)
        return self._finish(frame)

    def _finish(self, frame: np.ndarray) -> np.ndarray:
        cv2 = _cv2()
        if frame.ndim != 3 or frame.shape[2] != 3:
            raise HardwareError(f"frames have shape {frame.shape}, not 3 channels", where=self.name)
        if self._size is not None and frame.shape[:2] != self._size:
            raise HardwareError(
                f"a frame is {frame.shape[1]}x{frame.shape[0]}, the camera said "
                f"{self._size[1]}x{self._size[0]}",
                where=self.name,
            )
        if self.config.color_mode == "rgb":
            frame = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        if self._rotate is not None:
            frame = cv2.rotate(frame, self._rotate)
        return frame

    def _close(self) -> None:
        capture, self._capture_device = self._capture_device, None
        if capture is not None:
            capture.release()

    def _final_size(self) -> tuple[int, int]:
        if self._size is None:
            if self.config.width is None or self.config.height is None:
                raise HardwareError(
                    "the frame size is known once the camera is connected", where=self.name
                )
            return self.config.height, self.config.width
        height, width = self._size
        return (width, height) if self._rotate in self._quarter_turns() else (height, width)

    @staticmethod
    def _quarter_turns() -> tuple[int, ...]:
        cv2 = _cv2()
        return (cv2.ROTATE_90_CLOCKWISE, cv2.ROTATE_90_COUNTERCLOCKWISE)


@attrs.frozen
class CameraInfo:
    """One camera OpenCV can open, with the profile it starts in."""

    id: int | str
    backend: str
    width: int
    height: int
    fps: float
    fourcc: str


def _candidates() -> Iterator[int | str]:
    if platform.system() == "Linux":
        yield from (str(p) for p in sorted(Path("/dev").glob("video*"), key=lambda p: p.name))
    else:
        yield from range(MAX_INDEX_SCANNED)


def find_cameras() -> list[CameraInfo]:
    """Every camera OpenCV opens, as LeRobot's `find_cameras` lists them."""
    cv2 = _cv2()
    found = []
    for target in _candidates():
        capture = cv2.VideoCapture(target)
        try:
            if not capture.isOpened():
                continue
            found.append(
                CameraInfo(
                    id=target,
                    backend=capture.getBackendName(),
                    width=int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
                    height=int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
                    fps=float(capture.get(cv2.CAP_PROP_FPS)),
                    fourcc=_fourcc_text(capture.get(cv2.CAP_PROP_FOURCC)),
                )
            )
        finally:
            capture.release()
    return found
