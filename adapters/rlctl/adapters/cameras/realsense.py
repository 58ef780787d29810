"""Intel RealSense cameras through pyrealsense2: colour, depth beside it, or depth alone.

As LeRobot 0.6.1's `RealSenseCamera`: the device is found by serial number or by its name, the
colour stream comes as RGB8 (BGR on request) and depth as Z16, both at the configured size and
rate (or the camera's default profile), rotated alike. Depth comes out as uint16 millimetres of
shape (H, W, 1) — converted from the device's depth unit, which is a millimetre on most models but
a tenth of one on the D405, where LeRobot passes the raw values on. A file the SDK recorded
(`.db3`; `.bag` from older SDKs) plays back as the camera it recorded, at its recorded pace.

Frames are captured on a background thread (`capture_thread`); `read_latest_with_depth` gives
the colour and the depth of one frame set, as a robot records them. A depth-only camera
(`use_rgb: false`, LeRobot's) streams depth alone: `read_latest_depth` gives it, and the colour
reads say there is no colour. Everything that goes wrong is a `HardwareError` naming the camera
and what to do.
"""

from __future__ import annotations

import collections
import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.cameras.capture_thread import CameraLost, CaptureThreadCamera
from rlctl.adapters.cameras.config import RealSenseCameraConfig
from rlctl.domain.errors import HardwareError, NotSupported

log = structlog.get_logger(__name__)

MM_PER_METRE = 1000.0
UINT16_MAX = 65535
FIND_HINT = "`rlctl find-cameras` lists the RealSense cameras it sees, with their serial numbers"


def _rs() -> Any:
    try:
        import pyrealsense2 as rs  # type: ignore[import-not-found, unused-ignore]
    except ImportError as error:
        raise NotSupported(
            "pyrealsense2 is not installed, so RealSense cameras cannot be opened",
            hint="install it: pip install 'rlctl[realsense]' (Linux and Windows wheels)",
        ) from error
    return rs


def context() -> Any:
    """The SDK context devices are looked up in (a seam: tests add a software device to one)."""
    return _rs().context()


def devices(ctx: Any) -> list[tuple[str, str]]:
    """(serial number, name) of every RealSense device `ctx` sees."""
    rs = _rs()
    try:
        found = list(ctx.query_devices())
    except RuntimeError as error:
        raise HardwareError(
            f"the RealSense SDK could not list its devices ({error})",
            where="intelrealsense",
            hint="check the USB connection and the udev rules Intel's SDK installs",
        ) from error
    return [
        (
            str(device.get_info(rs.camera_info.serial_number)),
            str(device.get_info(rs.camera_info.name)),
        )
        for device in found
    ]


def find_serial(serial_number_or_name: str, ctx: Any) -> str:
    """The serial number of the device `serial_number_or_name` names, or a `HardwareError`
    listing the devices there are."""
    found = devices(ctx)
    wanted = serial_number_or_name.strip()
    by_serial = [serial for serial, _ in found if serial == wanted]
    if by_serial:
        return by_serial[0]
    by_name = [serial for serial, name in found if name == wanted]
    if len(by_name) == 1:
        return by_name[0]
    listed = ", ".join(f"{serial} ({name})" for serial, name in found) or "none"
    if len(by_name) > 1:
        raise HardwareError(
            f"{len(by_name)} RealSense cameras are named {wanted!r} (serial numbers "
            f"{', '.join(by_name)})",
            where=f"intelrealsense {wanted}",
            hint="give the serial number of the one to use as serial_number_or_name",
        )
    raise HardwareError(
        f"no RealSense camera has the serial number or name {wanted!r}; found: {listed}",
        where=f"intelrealsense {wanted}",
        hint=f"check it is plugged in (a USB 3 port) and not used by another program; {FIND_HINT}",
    )


class RealSenseCamera(CaptureThreadCamera):
    def __init__(self, config: RealSenseCameraConfig) -> None:
        super().__init__()
        self.config = config
        # The last frame sets, (colour, depth): the thread adds one before publishing its colour.
        self._pairs: collections.deque[tuple[np.ndarray, np.ndarray]] = collections.deque(maxlen=8)
        self._pipeline: Any = None
        self._playback: Any = None
        self._serial: str | None = None
        self._size: tuple[int, int] | None = None  # (height, width) captured, before rotation
        self._fps = float(config.fps) if config.fps else 0.0
        self._mm_per_unit = 1.0
        self._timeout_ms = 1000

    @property
    def name(self) -> str:
        source = self.config.serial_number_or_name
        return f"intelrealsense {self._serial or source}"

    @property
    def use_depth(self) -> bool:
        """Whether the robot records this camera's depth too (`<camera>_depth`), as LeRobot's
        robots ask their cameras."""
        return self.config.use_depth

    @property
    def use_rgb(self) -> bool:
        """Whether the camera gives colour (false: a depth-only camera, recorded as
        `<camera>_depth` alone), as LeRobot's robots ask their cameras."""
        return self.config.use_rgb

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
        self._pairs.clear()
        super().connect()
        if self.config.warmup_s > 0 and not self.config.is_recording:
            # Auto exposure settles while the thread keeps capturing.
            self._stop.wait(self.config.warmup_s)
            super().read_latest(max_age_s=max(1.0, self.config.warmup_s))

    def _no_colour(self) -> HardwareError:
        return HardwareError(
            "this camera was opened without colour (use_rgb: false): it gives depth only",
            where=self.name,
            hint="read its depth (`<camera>_depth`), or set use_rgb: true",
        )

    def read(self) -> np.ndarray:
        if not self.config.use_rgb:
            raise self._no_colour()
        return super().read()

    def async_read(self, timeout_s: float = 0.2, *, newer_than: int | None = None) -> np.ndarray:
        if not self.config.use_rgb:
            raise self._no_colour()
        return super().async_read(timeout_s, newer_than=newer_than)

    def read_latest(self, max_age_s: float = 0.5) -> np.ndarray:
        if not self.config.use_rgb:
            raise self._no_colour()
        return super().read_latest(max_age_s)

    def read_latest_depth(self, max_age_s: float = 0.5) -> np.ndarray:
        """The depth of the newest frame set, uint16 millimetres (H, W, 1); never waits."""
        if not self.config.use_rgb and self.config.use_depth:
            return super().read_latest(max_age_s)  # depth alone: the frame the thread publishes
        return self.read_latest_with_depth(max_age_s)[1]

    def read_latest_with_depth(self, max_age_s: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
        """The newest colour frame and the depth of the same frame set, taken together so a
        frame set arriving in between cannot pair one frame's colour with the next one's depth."""
        if not self.config.use_depth:
            raise HardwareError(
                "this camera was opened without depth",
                where=self.name,
                hint="set use_depth: true in the camera's settings",
            )
        if not self.config.use_rgb:
            raise self._no_colour()
        color = super().read_latest(max_age_s)
        for shown, depth in reversed(self._pairs):
            if shown is color:
                return color, depth
        raise HardwareError("a colour frame came without its depth", where=self.name)

    def _hint(self) -> str:
        if self.config.is_recording:
            return "loop the recording (loop: true) or record a longer one"
        return f"check the USB cable (a USB 3 port) and that no other program uses it; {FIND_HINT}"

    # The source

    def _open(self) -> None:
        rs = _rs()
        config = rs.config()
        source = self.config.serial_number_or_name
        if self.config.is_recording:
            path = Path(source).expanduser()
            if not path.is_file():
                raise HardwareError(
                    "no such RealSense recording",
                    where=f"intelrealsense {source}",
                    hint="give the path of a .db3 (or .bag) file the RealSense SDK recorded",
                )
            config.enable_device_from_file(str(path), repeat_playback=self.config.loop)
        else:
            self._serial = find_serial(source, context())
            config.enable_device(self._serial)
        self._enable_streams(rs, config)
        pipeline = rs.pipeline()
        try:
            profile = pipeline.start(config)
        except RuntimeError as error:
            raise HardwareError(
                f"the camera does not stream {self._wanted()} ({error})",
                where=self.name,
                hint="set fps, width and height to a profile the camera offers, or leave all "
                f"three out for its default; {FIND_HINT}",
            ) from error
        self._pipeline = pipeline
        try:
            self._configure(rs, profile)
        except BaseException:
            self._close()
            raise

    def _wanted(self) -> str:
        streams = {
            (True, True): "colour and depth",
            (True, False): "colour",
            (False, True): "depth",
        }[(self.config.use_rgb, self.config.use_depth)]
        size = self._captured_size()
        if size is None:
            return f"{streams} in its default profile"
        return f"{streams} at {size[1]}x{size[0]} and {self.config.fps:g} fps"

    def _enable_streams(self, rs: Any, config: Any) -> None:
        size = self._captured_size()
        streams = [(rs.stream.color, rs.format.rgb8)] if self.config.use_rgb else []
        if self.config.use_depth:
            streams.append((rs.stream.depth, rs.format.z16))
        for stream, pixels in streams:
            if size is None or not self.config.fps:
                config.enable_stream(stream)
            else:
                config.enable_stream(stream, size[1], size[0], pixels, round(self.config.fps))

    def _configure(self, rs: Any, profile: Any) -> None:
        device = profile.get_device()
        if self._serial is None:
            self._serial = str(device.get_info(rs.camera_info.serial_number))
        if device.is_playback():
            self._playback = device.as_playback()
            self._playback.set_real_time(True)  # frames at the pace they were recorded
        elif self.config.colour_options:
            self._set_colour_options(rs, device)
        # The size and rate of the colour stream (of the depth stream for a depth-only camera).
        main = rs.stream.color if self.config.use_rgb else rs.stream.depth
        stream = profile.get_stream(main).as_video_stream_profile()
        self._size = (int(stream.height()), int(stream.width()))
        self._fps = float(self.config.fps or stream.fps())
        if self.config.use_depth:
            depth = profile.get_stream(rs.stream.depth).as_video_stream_profile()
            if (int(depth.height()), int(depth.width())) != self._size:
                raise HardwareError(
                    f"depth frames are {depth.width()}x{depth.height()}, colour frames "
                    f"{self._size[1]}x{self._size[0]}",
                    where=self.name,
                    hint="set fps, width and height to a profile both streams offer",
                )
            # The SDK gives the unit as a float32 (0.0001 reads 9.99999974e-05): its 6 digits.
            scale = float(f"{device.first_depth_sensor().get_depth_scale():.6g}")
            self._mm_per_unit = scale * MM_PER_METRE
        # Long enough for a slow first frame set, short enough to notice a lost camera.
        self._timeout_ms = max(1000, round(5000 / max(self._fps, 1.0)))

    def _set_colour_options(self, rs: Any, device: Any) -> None:
        """Exposure, gain and white balance on the colour sensor, LeRobot's way: auto-exposure
        off before exposure or gain, auto white balance off before white balance; only on a
        dedicated "RGB Camera" module (a D405's colour comes from its stereo module, whose
        settings the depth shares: never touched)."""
        sensors = {str(s.get_info(rs.camera_info.name)): s for s in device.query_sensors()}
        sensor = sensors.get("RGB Camera")
        if sensor is None:
            raise HardwareError(
                "exposure, gain and white balance are set on a dedicated colour module, which "
                f"this camera does not have (it has: {', '.join(sensors) or 'no sensors'})",
                where=self.name,
                hint="leave exposure, gain and white_balance out for this camera",
            )
        wanted = self.config.colour_options
        options = {
            "exposure": rs.option.exposure,
            "gain": rs.option.gain,
            "white_balance": rs.option.white_balance,
        }
        missing = [name for name in wanted if not sensor.supports(options[name])]
        if missing:
            raise HardwareError(
                f"the colour sensor has no {', '.join(missing)} setting",
                where=self.name,
                hint=f"leave {', '.join(missing)} out for this camera",
            )
        steps: list[tuple[str, Any, int]] = []
        if "exposure" in wanted or "gain" in wanted:
            steps.append(("auto-exposure", rs.option.enable_auto_exposure, 0))
        steps += [
            (name, options[name], wanted[name]) for name in ("exposure", "gain") if name in wanted
        ]
        if "white_balance" in wanted:
            steps.append(("auto white balance", rs.option.enable_auto_white_balance, 0))
            steps.append(("white_balance", rs.option.white_balance, wanted["white_balance"]))
        for label, option, value in steps:
            if label.startswith("auto") and not sensor.supports(option):
                log.warning(
                    "the colour sensor cannot turn this off", setting=label, camera=self.name
                )
                continue
            self._set_option(sensor, option, value, label)

    def _set_option(self, sensor: Any, option: Any, value: int, label: str) -> None:
        try:
            sensor.set_option(option, value)
        except RuntimeError as error:
            try:
                limits = sensor.get_option_range(option)
                within = (
                    f" (the sensor takes {limits.min:g} to {limits.max:g}"
                    f" in steps of {limits.step:g})"
                )
            except RuntimeError:
                within = ""
            raise HardwareError(
                f"the colour sensor refused {label} = {value}{within}: {error}",
                where=self.name,
                hint=f"set {label} within the sensor's range, or leave it out",
            ) from error

    def _captured_size(self) -> tuple[int, int] | None:
        if self.config.width is None or self.config.height is None:
            return None
        height, width = self.config.height, self.config.width
        # Configured sizes are after rotation; a quarter turn swaps what the sensor captures.
        return (width, height) if self._quarter_turn() else (height, width)

    def _quarter_turn(self) -> bool:
        return self.config.rotation in (90, -90, 270)

    def _grab(self) -> np.ndarray | None:
        rs = _rs()
        ok, frames = self._pipeline.try_wait_for_frames(self._timeout_ms)
        if not ok:
            if self._playback is not None and (
                self._playback.current_status() == rs.playback_status.stopped
            ):
                # Said with the camera's own hint (the generic end of a source names a file
                # setting of another camera kind).
                raise CameraLost(
                    "the source ended (the end of the recording)",
                    where=self.name,
                    hint=self._hint(),
                )
            raise HardwareError(
                f"no frame set within {self._timeout_ms} ms", where=self.name, hint=self._hint()
            )
        if not self.config.use_rgb:
            return self._depth_of(frames)
        color = frames.get_color_frame()
        if not color:
            raise HardwareError("a frame set without its colour frame", where=self.name)
        image = self._finish(np.asanyarray(color.get_data()), channels=3)
        if self.config.color_mode == "bgr":
            image = image[..., ::-1]
        image = np.ascontiguousarray(image)
        if self.config.use_depth:
            self._pairs.append((image, self._depth_of(frames)))
        return image

    def _depth_of(self, frames: Any) -> np.ndarray:
        """The frame set's depth, uint16 millimetres (H, W, 1), rotated."""
        depth = frames.get_depth_frame()
        if not depth:
            raise HardwareError("a frame set without its depth frame", where=self.name)
        raw = self._finish(np.asanyarray(depth.get_data()), channels=None)
        return self._millimetres(raw)[..., np.newaxis]

    def _finish(self, frame: np.ndarray, *, channels: int | None) -> np.ndarray:
        """The frame checked against the configured size, copied out of the SDK's buffer (which
        it reuses) and rotated."""
        expected = self._size
        shape = frame.shape[:2]
        if expected is not None and shape != expected:
            raise HardwareError(
                f"a frame is {shape[1]}x{shape[0]}, the camera said {expected[1]}x{expected[0]}",
                where=self.name,
            )
        if channels is not None and (frame.ndim != 3 or frame.shape[2] != channels):
            raise HardwareError(f"frames have shape {frame.shape}, not RGB", where=self.name)
        turns = {90: -1, 180: 2, -90: 1, 270: 1}.get(self.config.rotation, 0)
        return np.array(np.rot90(frame, k=turns) if turns else frame, order="C", copy=True)

    def _millimetres(self, raw: np.ndarray) -> np.ndarray:
        if raw.dtype == np.uint16 and self._mm_per_unit == 1.0:
            return raw
        scaled = np.rint(raw.astype(np.float64) * self._mm_per_unit)
        return np.clip(scaled, 0, UINT16_MAX).astype(np.uint16)

    def _grab_timeout_s(self) -> float:
        return self._timeout_ms / 1000.0

    def _close(self) -> None:
        pipeline, self._pipeline = self._pipeline, None
        self._playback = None
        if pipeline is not None:
            # Already stopped by a device that went away: nothing left to release.
            with contextlib.suppress(RuntimeError):
                pipeline.stop()

    def _final_size(self) -> tuple[int, int]:
        if self._size is None:
            if self.config.width is None or self.config.height is None:
                raise HardwareError(
                    "the frame size is known once the camera is connected", where=self.name
                )
            return self.config.height, self.config.width
        height, width = self._size
        return (width, height) if self._quarter_turn() else (height, width)
