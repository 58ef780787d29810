"""`LiveDisplay` over rerun: the native viewer, rerun's web viewer, or an `.rrd` file.

Entities, one per feature as the dataset names it: `observation.images.front` (a picture),
`observation.state` and `action` (one line per dimension, named from the feature's `names`),
on two timelines, `frame` (the tick) and `time` (tick / fps).

The control loop only puts the frame on a short queue (about a microsecond); a thread of this
adapter shrinks the pictures, compresses them to JPEG (Pillow releases the interpreter lock
while it encodes) and hands everything to rerun, which batches and sends on threads of its own.
When that thread falls behind, frames are dropped rather than the loop slowed; how many is
logged at the end.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import queue
import sys
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.display.settings import DisplayMode, DisplaySettings
from rlctl.domain.config import structure
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import NUMERIC_DTYPES, FeatureSpec, dimension_names

log = structlog.get_logger(__name__)

DEFAULT_FOLDER = Path("outputs/display")
FRAME_TIMELINE = "frame"
TIME_TIMELINE = "time"
_STOP = object()
# How long closing waits for rerun to deliver what is queued (a viewer that went away).
_FLUSH_TIMEOUT_S = 10.0


def has_screen(environ: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """Whether a window can open here: macOS and Windows have a desktop unless reached over SSH;
    elsewhere an X11 or Wayland display must be named."""
    env = os.environ if environ is None else environ
    system = sys.platform if platform is None else platform
    if system in ("darwin", "win32"):
        return "SSH_CONNECTION" not in env
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def chosen_mode(mode: DisplayMode, screen: bool) -> DisplayMode:
    if mode == "auto":
        return "viewer" if screen else "file"
    return mode


def default_rrd(name: str, now: dt.datetime | None = None) -> Path:
    now = now or dt.datetime.now()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "run"
    return DEFAULT_FOLDER / f"{safe}_{now:%Y-%m-%d_%H-%M-%S}.rrd"


def shrink(image: np.ndarray, max_side: int) -> np.ndarray:
    """Every k-th row and column, k the smallest whole step bringing the longer side to at most
    `max_side` (no filtering: this runs per frame and only has to be recognisable)."""
    longest = max(image.shape[0], image.shape[1])
    if max_side <= 0 or longest <= max_side:
        return image
    step = -(-longest // max_side)
    return image[::step, ::step]


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class RerunDisplay:
    """`settings`: a `DisplaySettings` (or its mapping, as the container's configuration holds
    it). `announce` receives the one line that says where to watch (stderr by default)."""

    def __init__(
        self,
        settings: DisplaySettings | Mapping[str, Any] | None = None,
        *,
        announce: Callable[[str], None] | None = None,
        environ: Mapping[str, str] | None = None,
        platform: str | None = None,
    ) -> None:
        if settings is None:
            settings = DisplaySettings()
        elif not isinstance(settings, DisplaySettings):
            settings = structure(settings, DisplaySettings)
        self.settings = settings
        self._announce = announce or _to_stderr
        self._block = False
        self._screen = has_screen(environ, platform)
        self._recording: Any = None
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, settings.queue_frames))
        self._images: set[str] = set()
        self._vectors: set[str] = set()
        self._fps = 30
        self.mode: DisplayMode | None = None
        # Where to watch: the .rrd file, or the web viewer's address.
        self.rrd_path: Path | None = None
        self.web_url: str | None = None
        self.dropped = 0
        self.shown = 0
        self._failure: BaseException | None = None

    # The port

    def open(
        self, features: Mapping[str, FeatureSpec], *, fps: int, name: str, paced: bool = True
    ) -> None:
        import rerun as rr
        from PIL import Image  # noqa: F401  (imported here, not on the first frame)

        if self._recording is not None:
            self.close()
        self._fps = max(1, int(fps))
        self._block = not paced  # unpaced callers wait for room: every frame is shown
        self._images = {k for k, spec in features.items() if spec.is_visual}
        self._vectors = {
            k for k, spec in features.items() if not spec.is_visual and spec.dtype in NUMERIC_DTYPES
        }
        recording = rr.RecordingStream(f"rlctl_{name}")
        recording.send_recording_name(name)
        self.mode = chosen_mode(self.settings.mode, self._screen)
        self._connect(recording, name)
        for key in sorted(self._vectors):
            recording.log(
                key, rr.SeriesLines(names=list(dimension_names(features[key]))), static=True
            )
        self._recording = recording
        self.dropped = self.shown = 0
        self._failure = None
        self._queue = queue.Queue(maxsize=max(1, self.settings.queue_frames))
        self._thread = threading.Thread(target=self._send_frames, name="rerun-display", daemon=True)
        self._thread.start()

    def log_frame(
        self, step: int, observation: Mapping[str, Any], action: np.ndarray | None
    ) -> None:
        if self._thread is None:
            return
        try:
            self._queue.put((step, observation, action), block=self._block)
        except queue.Full:
            self.dropped += 1

    def close(self) -> None:
        thread, recording = self._thread, self._recording
        self._thread = None  # frames logged from now on are ignored
        if thread is not None:
            self._queue.put(_STOP)  # after the frames already queued: they are all sent
            thread.join()
        self._recording = None
        if recording is None:
            return
        try:
            recording.flush(timeout_sec=_FLUSH_TIMEOUT_S)
        except Exception as error:  # a viewer that went away must not fail the run it showed
            log.warning("live display: rerun could not deliver every frame", error=str(error))
        finally:
            with contextlib.suppress(Exception):
                recording.disconnect()
        if self.dropped:
            log.warning("live display fell behind", dropped_frames=self.dropped, shown=self.shown)
        if self._failure is not None:
            log.warning("live display stopped", error=str(self._failure))
        if self.mode == "file" and self.rrd_path is not None:
            log.debug("live display written", rrd=str(self.rrd_path), frames=self.shown)

    # Where the frames go

    def _connect(self, recording: Any, name: str) -> None:
        import rerun as rr

        settings = self.settings
        if self.mode == "viewer":
            try:
                recording.spawn(port=settings.grpc_port, connect=True)
                self._announce(f"live display: rerun's viewer opens (port {settings.grpc_port})")
                return
            except Exception as error:  # no `rerun` executable, or no window could open
                log.warning("could not start rerun's viewer", error=str(error))
                self.mode = "file"
        if self.mode == "web":
            source = recording.serve_grpc(grpc_port=settings.grpc_port)
            rr.serve_web_viewer(web_port=settings.web_port, open_browser=False, connect_to=source)
            self.web_url = (
                f"http://127.0.0.1:{settings.web_port}/?url={urllib.parse.quote(source, safe=':/')}"
            )
            self._announce(
                f"live display: open {self.web_url} in a browser (served while this runs)"
            )
            return
        if self.mode != "file":
            raise InvalidInput(
                f"unknown display mode {self.mode!r}",
                where="display.mode",
                hint="use auto, viewer, web or file",
            )
        path = Path(settings.rrd).expanduser() if settings.rrd else default_rrd(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        recording.save(path)
        self.rrd_path = path
        why = "no screen here, so " if settings.mode == "auto" else ""
        self._announce(
            f"live display: {why}the frames go to {path}; view it with `rerun {path}` "
            f"(or watch live in a browser: --display.mode=web)"
        )

    # The sending thread

    def _send_frames(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if self._failure is not None:
                continue
            try:
                self._send(*item)
                self.shown += 1
            except Exception as error:  # a frame rerun refuses must not stop the run
                self._failure = error

    def _send(self, step: int, observation: Mapping[str, Any], action: np.ndarray | None) -> None:
        import rerun as rr

        recording = self._recording
        if recording is None:
            return
        recording.set_time(FRAME_TIMELINE, sequence=step)
        recording.set_time(TIME_TIMELINE, duration=step / self._fps)
        for key, value in observation.items():
            if key in self._vectors:
                recording.log(key, rr.Scalars(np.asarray(value, dtype=np.float64).reshape(-1)))
            elif key in self._images:
                recording.log(key, self._picture(value))
        if action is not None:
            recording.log("action", rr.Scalars(np.asarray(action, dtype=np.float64).reshape(-1)))

    def _picture(self, value: Any) -> Any:
        import rerun as rr

        if isinstance(value, (bytes, bytearray)):
            return rr.EncodedImage(contents=bytes(value))
        image = shrink(np.asarray(value), self.settings.image_max_side)
        if image.dtype == np.uint16 and (image.ndim == 2 or image.shape[2] == 1):
            # A depth camera's millimetres (`<camera>_depth`), shown as LeRobot shows them.
            return rr.DepthImage(np.ascontiguousarray(image.reshape(image.shape[:2])), meter=1000.0)
        if image.ndim == 3 and image.shape[0] in (1, 3) and image.shape[2] not in (1, 3):
            image = np.moveaxis(image, 0, -1)  # channel-first, as policies read them
        if image.dtype != np.uint8:
            image = (np.clip(image, 0.0, 1.0) * 255).astype(np.uint8)
        quality = self.settings.jpeg_quality
        if quality <= 0 or image.ndim != 3 or image.shape[2] != 3:
            return rr.Image(np.ascontiguousarray(image))
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(image)).save(buffer, format="JPEG", quality=quality)
        return rr.EncodedImage(contents=buffer.getvalue(), media_type="image/jpeg")
