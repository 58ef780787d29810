"""What every threaded camera shares: a capture thread, the newest frame, and clear failures.

A subclass opens its source (`_open`), grabs one frame (`_grab`, blocking until the source has
one; None when a finite source has ended) and closes it (`_close`). This base runs the thread
and implements the `Camera` port's reads on top of `LatestFrame`.
"""

from __future__ import annotations

import abc
import threading

import numpy as np
import structlog

from rlctl.adapters.cameras.latest_frame import LatestFrame
from rlctl.domain.errors import HardwareError

log = structlog.get_logger(__name__)

# Consecutive failed grabs before the camera is declared dead (a USB hiccup drops one or two).
MAX_FAILED_GRABS = 10
FIRST_FRAME_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 2.0
# How long a camera's driver gets to close before the program goes on without it: a driver
# that never returns (librealsense's pipeline stop has been seen to) must not hang a recording
# whose episodes are saved.
CLOSE_TIMEOUT_S = 10.0


class CameraLost(HardwareError):
    """Raised by `_grab` when the source is gone for good (a publisher that went silent past its
    timeout): the capture stops at once instead of retrying."""


class CaptureThreadCamera(abc.ABC):
    def __init__(self, *, first_frame_timeout_s: float = FIRST_FRAME_TIMEOUT_S) -> None:
        self._frames = LatestFrame()
        self._returned = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first_frame_timeout_s = first_frame_timeout_s

    # What a source supplies

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @abc.abstractmethod
    def _open(self) -> None:
        """Open the source or raise `HardwareError` saying why it cannot be opened."""

    @abc.abstractmethod
    def _grab(self) -> np.ndarray | None:
        """The next frame, final layout (rotated, colour order applied); None when a finite
        source has ended. Raise on a failed grab."""

    @abc.abstractmethod
    def _close(self) -> None: ...

    def _hint(self) -> str:
        return "check the cable and that no other program uses the camera; `rlctl find-cameras`"

    # The port

    @property
    def is_connected(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def connect(self) -> None:
        if self.is_connected:
            return
        self._frames.clear()
        self._returned = 0
        self._stop.clear()
        self._open()
        self._thread = threading.Thread(
            target=self._capture, name=f"camera {self.name}", daemon=True
        )
        self._thread.start()
        try:
            first = self._frames.wait_newer(0, self._first_frame_timeout_s)
        except HardwareError:
            self.disconnect()
            raise
        if first is None:
            self.disconnect()
            raise HardwareError(
                f"no frame within {self._first_frame_timeout_s:g} s of opening",
                where=self.name,
                hint=self._hint(),
            )

    def read(self) -> np.ndarray:
        return self.async_read(READ_TIMEOUT_S, newer_than=self._frames.sequence)

    def async_read(self, timeout_s: float = 0.2, *, newer_than: int | None = None) -> np.ndarray:
        self._require_connected()
        since = self._returned if newer_than is None else newer_than
        got = self._frames.wait_newer(since, timeout_s)
        if got is None:
            raise HardwareError(
                f"no new frame within {timeout_s * 1e3:.0f} ms: the camera stopped delivering",
                where=self.name,
                hint=self._hint(),
            )
        frame, self._returned = got
        return frame

    def read_latest(self, max_age_s: float = 0.5) -> np.ndarray:
        self._require_connected(allow_ended=True)
        frame, sequence, age = self._frames.latest()
        if frame is None or age > max_age_s:
            # A capture thread starved of the CPU for a moment (a loaded computer) is not a
            # dead camera: it gets one more window to deliver before the camera is called
            # stopped. Only a tick that is late already waits.
            got = self._frames.wait_newer(sequence, max_age_s)
            if got is None:
                raise HardwareError(
                    f"the newest frame is {(age + max_age_s) * 1e3:.0f} ms old: "
                    "the camera stopped delivering",
                    where=self.name,
                    hint=self._hint(),
                )
            frame, sequence = got
        self._returned = sequence
        return frame

    def disconnect(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            # The capture thread may be inside the driver's wait for a frame: closing the
            # device under it is what drivers handle worst, so it gets that wait to end.
            thread.join(timeout=max(2.0, self._grab_timeout_s() + 1.0))
        closing = threading.Thread(
            target=self._close_quietly, name=f"{self.name}-close", daemon=True
        )
        closing.start()
        closing.join(CLOSE_TIMEOUT_S)
        if closing.is_alive():
            log.warning(
                "the camera's driver did not close; going on without it",
                camera=self.name,
                waited_s=CLOSE_TIMEOUT_S,
                hint="unplug and replug the camera before using it again",
            )

    def _grab_timeout_s(self) -> float:
        """The longest one `_grab` waits for a frame (a camera waiting longer says so)."""
        return 0.0

    def _close_quietly(self) -> None:
        try:
            self._close()
        except Exception as error:
            log.warning("camera did not close cleanly", camera=self.name, error=str(error))

    # The thread

    def _capture(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                frame = self._grab()
            except CameraLost as error:
                self._frames.fail(error)
                return
            except Exception as error:
                failures += 1
                if failures >= MAX_FAILED_GRABS:
                    self._frames.fail(
                        HardwareError(
                            f"{failures} frames in a row could not be read ({error})",
                            where=self.name,
                            hint=self._hint(),
                        )
                    )
                    return
                continue
            if frame is None:
                self._frames.fail(
                    HardwareError(
                        "the source ended (end of the video file)",
                        where=self.name,
                        hint="loop the file (loop: true) or use a longer one",
                    )
                )
                return
            failures = 0
            self._frames.publish(frame)

    def _require_connected(self, *, allow_ended: bool = False) -> None:
        if self._thread is None:
            raise HardwareError(
                "the camera is not connected", where=self.name, hint="connect it first"
            )
        if not allow_ended and not self._thread.is_alive():
            self._frames.latest()  # raises the capture's failure, if any
