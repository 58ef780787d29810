"""`rlctl lekiwi-host`: LeKiwi's host, on the robot, as LeRobot 0.6.1's `lekiwi_host` runs it.

Two ZeroMQ sockets, bound on every interface: a PULL socket (`port_zmq_cmd`, newest message only)
takes the client's actions as JSON `{"arm_shoulder_pan.pos": …, "x.vel": …, …}`; a PUSH socket
(`port_zmq_observations`, two messages deep) sends each observation as one multipart message, a
JSON header (`{"_cams": [names], "arm_shoulder_pan.pos": …, "x.vel": …}`) then one JPEG per
camera. A camera with depth (a RealSense with `use_depth`) adds its depth to the header, under
`"_depth": {"<camera>_depth": base64 of a 16-bit PNG}`: lossless uint16 millimetres, where a
JPEG would lose them. LeRobot 0.6.1's client reads the header's `_cams` and state names only, so
it ignores the key (its LeKiwi refuses depth cameras itself); no frame is added after the JPEGs,
which its client zips strictly with `_cams`.

Each loop takes the newest command, sends it through the robot (and so its safety guard), and
publishes an observation, at most `max_loop_freq_hz` times a second.

The watchdog is LeRobot's: no command for `watchdog_timeout_ms` stops the base (the arm holds
where it was sent). A command that is not JSON or lacks a value is dropped and said once; it does
not feed the watchdog.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.adapters.robots.lekiwi import STATE_NAMES, LeKiwi
from rlctl.application.robot_features import DEPTH_SUFFIX, IMAGES_PREFIX, STATE_KEY
from rlctl.domain.errors import CalibrationError, HardwareError, NotSupported

log = structlog.get_logger(__name__)

JPEG_QUALITY = 90
# The header's key for the depth images (rlctl's; LeRobot's client ignores it).
DEPTH_KEY = "_depth"
# zlib level 1: depth images change every frame, and the host has a frame period to spend.
PNG_COMPRESSION = 1
# A command is nine numbers in JSON, a few hundred bytes.
MAX_COMMAND_BYTES = 64 * 1024


def _zmq() -> Any:
    try:
        import zmq
    except ImportError as error:
        raise NotSupported(
            "pyzmq is not installed", where="lekiwi host", hint="pip install 'rlctl[zmq]'"
        ) from error
    return zmq


@attrs.define
class HostReport:
    loops: int = 0
    commands: int = 0
    dropped: int = 0
    watchdog_stops: int = 0


def encode_depth(depth: np.ndarray) -> str:
    """A depth image (uint16, (H, W) or (H, W, 1)) as base64 of a 16-bit PNG (lossless)."""
    import cv2

    image = np.asarray(depth)
    if image.dtype != np.uint16 or image.ndim not in (2, 3) or image.size == 0:
        raise HardwareError(
            f"a depth image must be uint16 (H, W, 1), got {image.dtype} {image.shape}",
            where="lekiwi host",
        )
    ok, png = cv2.imencode(
        ".png", image.reshape(image.shape[:2]), [int(cv2.IMWRITE_PNG_COMPRESSION), PNG_COMPRESSION]
    )
    if not ok:
        raise HardwareError("OpenCV could not encode a depth image as PNG", where="lekiwi host")
    return base64.b64encode(png.tobytes()).decode("ascii")


def encode_observation(
    observation: dict[str, Any], cameras: list[str], depth_cameras: list[str] | None = None
) -> list[bytes]:
    """LeRobot's multipart observation: the JSON header (with the depth of `depth_cameras`),
    then one JPEG per camera."""
    import cv2

    state = observation[STATE_KEY]
    header: dict[str, Any] = {"_cams": cameras}
    header.update({name: float(v) for name, v in zip(STATE_NAMES, state, strict=True)})
    if depth_cameras:
        header[DEPTH_KEY] = {
            f"{name}{DEPTH_SUFFIX}": encode_depth(
                observation[f"{IMAGES_PREFIX}{name}{DEPTH_SUFFIX}"]
            )
            for name in depth_cameras
        }
    frames = [json.dumps(header).encode()]
    for name in cameras:
        ok, jpeg = cv2.imencode(
            ".jpg",
            observation[f"{IMAGES_PREFIX}{name}"],
            [int(cv2.IMWRITE_JPEG_QUALITY), JPEG_QUALITY],
        )
        frames.append(jpeg.tobytes() if ok else b"")
    return frames


def decode_command(message: bytes) -> np.ndarray:
    """A client's action as the robot's vector; ValueError saying what is wrong. Anyone on the
    network may send anything: text that is not UTF-8 or JSON, nesting deep enough to exhaust
    the parser, values of any type. A non-finite number is let through, for the robot's guard
    to hold."""
    try:
        data = json.loads(message.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise ValueError(f"a command is a JSON object ({type(error).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"a command is a JSON object, got {type(data).__name__}")
    missing = [name for name in STATE_NAMES if name not in data]
    if missing:
        raise ValueError(f"the command lacks {', '.join(missing)}")
    return np.asarray([_number(name, data[name]) for name in STATE_NAMES], dtype=np.float64)


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} is {type(value).__name__}, not a number")
    try:
        return float(value)
    except OverflowError:  # an integer past float's range
        raise ValueError(f"{name} is out of range") from None


class LeKiwiHost:
    def __init__(
        self,
        robot: LeKiwi,
        *,
        port_zmq_cmd: int = 5555,
        port_zmq_observations: int = 5556,
        connection_time_s: float = 30,
        watchdog_timeout_ms: int = 500,
        max_loop_freq_hz: float = 30,
        bind_address: str = "*",
    ) -> None:
        self.robot = robot
        self._ports = (port_zmq_cmd, port_zmq_observations)
        self._duration = connection_time_s
        self._watchdog_s = watchdog_timeout_ms / 1000
        self._period = 1 / max_loop_freq_hz
        self._address = bind_address
        self.stop_event = threading.Event()
        self.report = HostReport()

    def run(self) -> HostReport:
        zmq = _zmq()
        context = zmq.Context()
        sockets: list[Any] = []
        try:
            commands = context.socket(zmq.PULL)
            sockets.append(commands)
            commands.setsockopt(zmq.CONFLATE, 1)
            # A peer sending a larger message is cut off before it is read.
            commands.setsockopt(zmq.MAXMSGSIZE, MAX_COMMAND_BYTES)
            observations = context.socket(zmq.PUSH)
            sockets.append(observations)
            observations.setsockopt(zmq.SNDHWM, 2)
            for socket, port in zip(sockets, self._ports, strict=True):
                socket.setsockopt(zmq.LINGER, 0)
                try:
                    socket.bind(f"tcp://{self._address}:{port}")
                except zmq.ZMQError as error:
                    raise HardwareError(
                        f"cannot listen on port {port}: {error}",
                        where="lekiwi host",
                        hint="another host (or program) holds the port: stop it, or choose "
                        "other ports (--host.port_zmq_cmd, --host.port_zmq_observations) on "
                        "both sides",
                    ) from error
            self.robot.connect()
            try:
                uncalibrated = [
                    t.calibration_key.label
                    for t in self.robot.calibration_targets()
                    if not t.is_calibrated
                ]
                if uncalibrated:
                    raise CalibrationError(
                        "the robot has no calibration, so it cannot be driven",
                        where=uncalibrated[0],
                        hint="calibrate it on the robot first: `rlctl calibrate "
                        "--robot.type=lekiwi --robot.port=... --robot.id=...` (LeRobot's "
                        "calibration file works too)",
                    )
                self._loop(zmq, commands, observations)
            finally:
                self.robot.disconnect()
        finally:
            for socket in sockets:
                socket.close(linger=0)
            context.term()
        return self.report

    def _loop(self, zmq: Any, commands: Any, observations: Any) -> None:
        visual = [
            (key.removeprefix(IMAGES_PREFIX), spec.is_depth_map)
            for key, spec in self.robot.observation_features.items()
            if key.startswith(IMAGES_PREFIX)
        ]
        cameras = [name for name, depth in visual if not depth]
        depth_cameras = [name.removesuffix(DEPTH_SUFFIX) for name, depth in visual if depth]
        start = last_command = time.monotonic()
        watchdog_active = False
        said_dropped = False
        log.info("LeKiwi host waiting for commands", ports=self._ports)
        while not self.stop_event.is_set() and time.monotonic() - start < self._duration:
            began = time.monotonic()
            try:
                message = commands.recv(zmq.NOBLOCK)
            except zmq.Again:
                message = None
            if message is not None:
                try:
                    action = decode_command(message)
                except ValueError as error:
                    self.report.dropped += 1
                    if not said_dropped:
                        log.warning("command dropped", reason=str(error), note="said once")
                        said_dropped = True
                else:
                    self.robot.send_action(action)
                    self.report.commands += 1
                    last_command = time.monotonic()
                    watchdog_active = False
            if not watchdog_active and time.monotonic() - last_command > self._watchdog_s:
                log.warning("no command: base stopped", silent_ms=round(self._watchdog_s * 1000))
                self.robot.stop_base()
                self.report.watchdog_stops += 1
                watchdog_active = True
            frames = encode_observation(self.robot.get_observation(), cameras, depth_cameras)
            # No client, or one that is behind: the observation is dropped.
            with contextlib.suppress(zmq.Again):
                observations.send_multipart(frames, flags=zmq.NOBLOCK)
            self.report.loops += 1
            self.stop_event.wait(max(0.0, self._period - (time.monotonic() - began)))
