"""`--robot.type=earthrover_mini_plus`: FrodoBots' EarthRover Mini Plus through the vendor's SDK
server (HTTP on `sdk_url`), as LeRobot 0.6.1's `EarthRoverMiniPlus`.

The SDK's endpoints, as LeRobot uses them: `GET /data` (telemetry JSON), `GET /v2/front` and
`GET /v2/rear` (`{"front_frame": <base64 JPEG>}`), `POST /control`
(`{"command": {"linear": l, "angular": a, "lamp": 0}}`, both in -1..1).

Features are LeRobot's, as its `hw_to_dataset_features` makes them: `observation.state` is 22
float32 (`speed`, `battery_level`, `orientation`, `gps_latitude`, `gps_longitude`, `gps_signal`,
`signal_level`, `vibration`, `lamp`, `accelerometer_x/y/z`, `gyroscope_x/y/z`,
`magnetometer_filtered_x/y/z`, `wheel_rpm_0..3`: raw SDK values, the sensor arrays' newest
entry), `observation.images.front` / `.rear` are 480x640 RGB (each frame resized to 640x480 and
turned from OpenCV's BGR to RGB, as LeRobot does), and `action` is `linear_velocity`,
`angular_velocity`.

Where LeRobot serves a cached frame (or a black one) forever when the SDK fails, rlctl keeps the
last good reading of each part (a camera, the telemetry) through a slow or failed request or a
picture that does not decode, says so once per episode, and after `observation_timeout_s` with
no good reading raises one `HardwareError` naming the part. A telemetry field that is missing or
not a finite number keeps its last finite value (0 before any), said once per episode.

Every command passes the guard: finite and within `max_linear_velocity` / `max_angular_velocity`
(a small overshoot clipped), or the rover is stopped (zero velocity: holding a velocity would
keep it driving). A watchdog stops it when no command came for `command_timeout_s`, and
disconnecting stops it.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.cameras.picture_header import MAX_PICTURE_SIDE, picture_size
from rlctl.adapters.robots.config import EarthRoverMiniPlusConfig
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import (
    IMAGES_PREFIX,
    STATE_KEY,
    action_feature,
    camera_feature,
    state_feature,
)
from rlctl.domain.action_guard import ActionGuard, ActionLimits
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported
from rlctl.domain.features import FeatureSpec

log = structlog.get_logger(__name__)

ROBOT_TYPE = "earthrover_mini_plus"
ACTION_NAMES = ("linear_velocity", "angular_velocity")
CAMERAS = ("front", "rear")
HEIGHT, WIDTH = 480, 640
# LeRobot's observation features, in its order: (feature name, SDK field, index in the newest
# entry of a sensor array or None for a plain field).
TELEMETRY: tuple[tuple[str, str, int | None], ...] = (
    ("speed", "speed", None),
    ("battery_level", "battery", None),
    ("orientation", "orientation", None),
    ("gps_latitude", "latitude", None),
    ("gps_longitude", "longitude", None),
    ("gps_signal", "gps_signal", None),
    ("signal_level", "signal_level", None),
    ("vibration", "vibration", None),
    ("lamp", "lamp", None),
    ("accelerometer_x", "accels", 0),
    ("accelerometer_y", "accels", 1),
    ("accelerometer_z", "accels", 2),
    ("gyroscope_x", "gyros", 0),
    ("gyroscope_y", "gyros", 1),
    ("gyroscope_z", "gyros", 2),
    ("magnetometer_filtered_x", "mags", 0),
    ("magnetometer_filtered_y", "mags", 1),
    ("magnetometer_filtered_z", "mags", 2),
    ("wheel_rpm_0", "rpms", 0),
    ("wheel_rpm_1", "rpms", 1),
    ("wheel_rpm_2", "rpms", 2),
    ("wheel_rpm_3", "rpms", 3),
)
STATE_NAMES = tuple(name for name, _, _ in TELEMETRY)
# An answer larger than this is not the SDK's (a frame is a few hundred kB of base64).
MAX_ANSWER_BYTES = 32 * 1024 * 1024
STOP = (0.0, 0.0)


class SdkRequestFailed(Exception):
    """One request to the SDK did not give a usable answer (the reason is the message)."""


class SdkClient:
    """The SDK's HTTP endpoints, each request bounded by `timeout_s` (the standard library's
    HTTP client: no dependency for three JSON endpoints)."""

    def __init__(self, base_url: str, timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        # The SDK runs beside rlctl (or on the local network): an HTTP_PROXY meant for the
        # internet must not carry the rover's commands.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self, path: str, *, timeout_s: float | None = None) -> Any:
        return self._request(urllib.request.Request(self.base_url + path), timeout_s)

    def post(self, path: str, body: dict[str, Any], *, timeout_s: float | None = None) -> Any:
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        return self._request(request, timeout_s)

    def _request(self, request: urllib.request.Request, timeout_s: float | None) -> Any:
        try:
            with self._opener.open(request, timeout=timeout_s or self.timeout_s) as answer:
                status = answer.status
                body = answer.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as error:
            raise SdkRequestFailed(f"HTTP {error.code} {error.reason}") from error
        except urllib.error.URLError as error:
            raise SdkRequestFailed(_reason(error.reason)) from error
        except (TimeoutError, OSError, ValueError) as error:
            # A read that times out, a connection dropped half-way, a malformed answer.
            raise SdkRequestFailed(_reason(error)) from error
        if status != 200:
            raise SdkRequestFailed(f"HTTP {status}")
        if len(body) > MAX_ANSWER_BYTES:
            raise SdkRequestFailed(f"an answer over {MAX_ANSWER_BYTES // 2**20} MiB")
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
            raise SdkRequestFailed(f"the answer is not JSON ({error})") from error


def _reason(error: object) -> str:
    if isinstance(error, TimeoutError) or "timed out" in str(error):
        return "no answer in time"
    if isinstance(error, ConnectionRefusedError) or "Connection refused" in str(error):
        return "connection refused: nothing listens there"
    return str(error) or type(error).__name__


def decode_frame(text: Any) -> np.ndarray:
    """A base64 JPEG (or PNG) from the SDK as LeRobot makes it: 480x640 RGB uint8 (resized with
    OpenCV's bilinear default, then BGR to RGB). ValueError says why it is no picture."""
    cv2 = _cv2()

    if not isinstance(text, str) or not text:
        raise ValueError("no frame in the answer")
    try:
        data = base64.b64decode(text)
    except (binascii.Error, ValueError) as error:
        raise ValueError(f"the frame is not base64 ({error})") from error
    size = picture_size(data)
    if size is None:
        raise ValueError("the frame is not a JPEG or PNG picture")
    if not (0 < size[0] <= MAX_PICTURE_SIDE and 0 < size[1] <= MAX_PICTURE_SIDE):
        raise ValueError(f"the frame claims {size[0]}x{size[1]} pixels")
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("the frame does not decode")
    if image.shape[:2] != (HEIGHT, WIDTH):
        image = cv2.resize(image, (WIDTH, HEIGHT))
    return np.ascontiguousarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as error:
        raise NotSupported(
            "OpenCV is not installed: the EarthRover's frames are decoded with it",
            where=ROBOT_TYPE,
            hint="pip install 'rlctl[cameras]'",
        ) from error
    return cv2


def _number(value: Any) -> float | None:
    """A finite float from a JSON value, or None (missing, null, text, NaN, infinite)."""
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):  # text that is no number; an integer past float's range
        return None
    return number if math.isfinite(number) else None


def telemetry_values(data: dict[str, Any]) -> list[float | None]:
    """The 22 state values from `/data` (None where a field is missing or not a finite number);
    a sensor array's newest entry, as LeRobot reads it."""
    values: list[float | None] = []
    for _, field, index in TELEMETRY:
        raw = data.get(field)
        if index is not None:
            newest = raw[-1] if isinstance(raw, list) and raw else None
            raw = newest[index] if isinstance(newest, list) and len(newest) > index else None
        values.append(_number(raw))
    return values


class _Part:
    """One part read from the SDK (a camera, the telemetry): when it last read well."""

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self.good_at: float | None = None
        self.failures = 0
        self.warned = False


class EarthRoverMiniPlus:
    def __init__(self, config: EarthRoverMiniPlusConfig, client: SdkClient | None = None) -> None:
        self.config = config
        self.sdk = client or SdkClient(config.sdk_url, config.request_timeout_s)
        linear, angular = config.max_linear_velocity, config.max_angular_velocity
        self._guard = ActionGuard(
            ActionLimits(ACTION_NAMES, [-linear, -angular], [linear, angular])
        )
        self.where = f"{ROBOT_TYPE} {self.sdk.base_url}"
        self._parts = {
            "front": _Part("front camera", "/v2/front"),
            "rear": _Part("rear camera", "/v2/rear"),
            "telemetry": _Part("telemetry", "/data"),
        }
        self._frames: dict[str, np.ndarray] = {}
        self._state = np.zeros(len(STATE_NAMES), dtype=np.float32)
        self._unfinite: set[str] = set()
        self._connected = False
        # Commands: the lock keeps the loop's and the watchdog's in order.
        self._send_lock = threading.Lock()
        self._commanded_at = 0.0
        self._accepted_at = 0.0
        self._moving = False
        # A command failed and that was said (said again after one gets through).
        self._refused = False
        self._watchdog: threading.Thread | None = None
        self._stop_watchdog = threading.Event()
        self.watchdog_stops = 0

    @property
    def robot_type(self) -> str:
        return ROBOT_TYPE

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        features = {STATE_KEY: state_feature(STATE_NAMES)}
        for camera in CAMERAS:
            spec = camera_feature(camera, HEIGHT, WIDTH)
            features[spec.key] = spec
        return features

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(ACTION_NAMES)}

    @property
    def realtime(self) -> bool:
        return True

    @property
    def is_connected(self) -> bool:
        return self._connected

    def _hint(self) -> str:
        return (
            "start FrodoBots' SDK server (`hypercorn main:app` in the earth-rovers-sdk folder, "
            "with the rover's token in its .env) and check robot.sdk_url "
            f"({self.config.sdk_url})"
        )

    def connect(self) -> None:
        """Wait (up to `connect_timeout_s`) for the SDK's telemetry and a frame of each camera,
        then stop the rover, so it starts still."""
        if self._connected:
            return
        _cv2()  # said before any waiting
        deadline = time.monotonic() + self.config.connect_timeout_s
        self._frames.clear()
        self._unfinite.clear()
        self._forget_readings()
        self._state = np.zeros(len(STATE_NAMES), dtype=np.float32)
        reasons: dict[str, str] = {}
        while True:
            for key, part in self._parts.items():
                if part.good_at is not None:
                    continue
                try:
                    self._read(key)
                except SdkRequestFailed as error:
                    reasons[key] = str(error)
            missing = [key for key, part in self._parts.items() if part.good_at is None]
            if not missing:
                break
            if time.monotonic() >= deadline:
                self._forget_readings()
                first = missing[0]
                nothing = len(missing) == len(self._parts)
                raise HardwareError(
                    (
                        f"no answer from the FrodoBots SDK at {self.sdk.base_url}"
                        if nothing
                        else f"the SDK gives no usable {self._parts[first].name} "
                        f"({self._parts[first].path})"
                    )
                    + f" within {self.config.connect_timeout_s:g} s: {reasons.get(first, '?')}",
                    where=self.where,
                    hint=self._hint()
                    if nothing
                    else "check the rover is online in the SDK's page and its cameras stream",
                )
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        try:
            self.sdk.post("/control", _command(*STOP))
        except SdkRequestFailed as error:
            raise HardwareError(
                f"the SDK at {self.sdk.base_url} takes no command (/control): {error}",
                where=self.where,
                hint=self._hint(),
            ) from error
        now = time.monotonic()
        self._commanded_at = self._accepted_at = now
        self._moving = False
        self._guard.forget()
        self._connected = True
        if self.config.command_timeout_s > 0:
            self._stop_watchdog.clear()
            self._watchdog = threading.Thread(
                target=self._watch, name="earthrover-watchdog", daemon=True
            )
            self._watchdog.start()

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []  # nothing to calibrate: the SDK takes velocities

    def reset(self) -> None:
        self._guard.begin_episode()
        self._unfinite.clear()
        for part in self._parts.values():
            part.warned = False

    @property
    def episode_over(self) -> bool:
        return False

    # Observations

    def get_observation(self) -> dict[str, Any]:
        self._require_connected()
        for key in self._parts:
            self._refresh(key)
        observation: dict[str, Any] = {STATE_KEY: self._state.copy()}
        for camera in CAMERAS:
            observation[f"{IMAGES_PREFIX}{camera}"] = self._frames[camera]
        return observation

    def _refresh(self, key: str) -> None:
        part = self._parts[key]
        try:
            self._read(key)
            return
        except SdkRequestFailed as error:
            reason = str(error)
        part.failures += 1
        silent = time.monotonic() - (part.good_at or 0.0)
        if silent > self.config.observation_timeout_s:
            raise HardwareError(
                f"no usable {part.name} from the SDK ({part.path}) for {silent:.1f} s: {reason}",
                where=self.where,
                hint="the SDK server stopped or lost the rover; " + self._hint(),
            )
        if not part.warned:
            part.warned = True
            log.warning(
                f"{part.name}: keeping the last reading",
                robot=ROBOT_TYPE,
                reason=reason,
                note="said once per episode",
            )

    def _read(self, key: str) -> None:
        """One reading of a part, kept when good; SdkRequestFailed when not."""
        part = self._parts[key]
        answer = self.sdk.get(part.path)
        if not isinstance(answer, dict):
            raise SdkRequestFailed("the answer is not a JSON object")
        if key == "telemetry":
            self._take_telemetry(answer)
        else:
            try:
                self._frames[key] = decode_frame(answer.get(f"{key}_frame"))
            except ValueError as error:
                raise SdkRequestFailed(str(error)) from error
        part.good_at = time.monotonic()

    def _take_telemetry(self, data: dict[str, Any]) -> None:
        wide = np.asarray(
            [np.nan if v is None else v for v in telemetry_values(data)], dtype=np.float64
        )
        # A value past float32's range is no more finite once stored than NaN is.
        with np.errstate(over="ignore"):
            values = wide.astype(np.float32)
        good = np.isfinite(values)
        state = np.where(good, values, self._state).astype(np.float32)
        bad = [name for name, ok in zip(STATE_NAMES, good, strict=True) if not ok]
        new = sorted(set(bad) - self._unfinite)
        if new:
            self._unfinite.update(new)
            log.warning(
                "telemetry fields missing or not finite: keeping their last values",
                robot=ROBOT_TYPE,
                fields=new,
                note="said once per episode",
            )
        self._state = state

    # Commands

    def send_action(self, action: np.ndarray) -> np.ndarray:
        self._require_connected()
        try:
            values = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            values = np.full(len(ACTION_NAMES), np.nan)
        if values.shape != (len(ACTION_NAMES),):
            raise InvalidInput(
                f"an EarthRover action has {len(ACTION_NAMES)} values ({', '.join(ACTION_NAMES)}),"
                f" got {values.size}",
                where=f"{ROBOT_TYPE} action",
            )
        decision = self._guard(values)
        if decision.held or decision.values is None:
            if decision.first_hold:
                log.warning(
                    "action refused: rover stopped",
                    robot=ROBOT_TYPE,
                    reason=decision.reason,
                    note="said once per episode; every refused action stops it",
                )
            sent = STOP
        else:
            # The values as asked (float64, not the guard's float32), brought to the limits.
            limits = self._guard.limits
            safe = np.clip(values, limits.low, limits.high)
            sent = (float(safe[0]), float(safe[1]))
        with self._send_lock:
            self._commanded_at = time.monotonic()
            self._post(sent)
        return np.asarray(sent, dtype=np.float32)

    def _post(self, command: tuple[float, float]) -> None:
        """Send one command (the send lock held). A command that does not get through is said
        once; none getting through for `observation_timeout_s` is a lost robot."""
        try:
            self.sdk.post("/control", _command(*command))
        except SdkRequestFailed as error:
            silent = time.monotonic() - self._accepted_at
            if silent > self.config.observation_timeout_s:
                raise HardwareError(
                    f"no command taken by the SDK (/control) for {silent:.1f} s: {error}",
                    where=self.where,
                    hint="the SDK server stopped or lost the rover; " + self._hint(),
                ) from error
            if not self._refused:
                self._refused = True
                log.warning(
                    "a command did not get through",
                    robot=ROBOT_TYPE,
                    reason=str(error),
                    note="said once until one does",
                )
            return
        self._refused = False
        self._accepted_at = time.monotonic()
        self._moving = command != STOP

    def _watch(self) -> None:
        """Stop the rover when no command came for `command_timeout_s` (a stalled loop, a reset
        phase with nothing driving)."""
        timeout = self.config.command_timeout_s
        while not self._stop_watchdog.wait(min(0.05, timeout / 4)):
            with self._send_lock:
                if not self._moving or time.monotonic() - self._commanded_at <= timeout:
                    continue
                try:
                    self.sdk.post("/control", _command(*STOP))
                except SdkRequestFailed as error:
                    if not self._refused:
                        self._refused = True
                        log.warning(
                            "the watchdog could not stop the rover",
                            robot=ROBOT_TYPE,
                            reason=str(error),
                            note="said once until a command gets through",
                        )
                    continue
                self._refused = False
                self._accepted_at = time.monotonic()
                self._moving = False
                self.watchdog_stops += 1
            log.warning("no command: rover stopped", robot=ROBOT_TYPE, silent_s=round(timeout, 3))

    def disconnect(self) -> None:
        """Stop the rover (zero velocity) and the watchdog; safe twice."""
        watchdog, self._watchdog = self._watchdog, None
        self._stop_watchdog.set()
        if watchdog is not None:
            watchdog.join(timeout=5)
        if not self._connected:
            return
        self._connected = False
        with self._send_lock:
            try:
                self.sdk.post("/control", _command(*STOP))
                self._moving = False
            except SdkRequestFailed as error:
                log.warning(
                    "the rover could not be told to stop", robot=ROBOT_TYPE, reason=str(error)
                )
        self._forget_readings()

    def _forget_readings(self) -> None:
        for part in self._parts.values():
            part.good_at = None
            part.warned = False

    def _require_connected(self) -> None:
        if not self._connected:
            raise HardwareError(
                "the EarthRover is not connected", where=self.where, hint="connect it first"
            )


def _command(linear: float, angular: float) -> dict[str, Any]:
    return {"command": {"linear": linear, "angular": angular, "lamp": 0}}


def earthrover_mini_plus(
    config: EarthRoverMiniPlusConfig, *, calibration_store: CalibrationStore | None = None
) -> EarthRoverMiniPlus:
    return EarthRoverMiniPlus(config)
