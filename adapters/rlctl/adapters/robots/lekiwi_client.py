"""`--robot.type=lekiwi_client`: LeKiwi seen from a laptop, over ZeroMQ to the host running on the
robot (`rlctl lekiwi-host`, or LeRobot's `lekiwi_host`), as LeRobot 0.6.1's `LeKiwiClient`.

Features are LeRobot's: the state and the action are the arm's six positions then `x.vel`,
`y.vel` (m/s) and `theta.vel` (deg/s); the cameras are the host's, at their configured sizes. Each
observation is the newest the host sent; unlike LeRobot's client, a host silent for
`observation_timeout_s` is a lost robot (one `HardwareError` naming it), not a frozen picture.

A client camera with `use_depth` (a RealSense's settings, as on the host) also gives (with
`use_rgb: false`, only gives) `observation.images.<camera>_depth`, uint16 millimetres (H, W, 1),
from the host's header (`_depth`, 16-bit PNG: lossless; see `lekiwi_host`). LeRobot 0.6.1's
host sends no depth (its LeKiwi refuses depth cameras), so with one the client says so.

Actions pass the client's guard before they leave: finite, base velocities inside the configured
limits (the arm's calibrated ranges are the host's, and its guard checks them). A refused action
sends the last safe arm goals with the base stopped.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import struct
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.cameras.picture_header import picture_size
from rlctl.adapters.robots.config import LeKiwiClientConfig
from rlctl.adapters.robots.lekiwi import BASE_NAMES, STATE_NAMES, base_limits
from rlctl.adapters.robots.lekiwi_host import DEPTH_KEY
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import (
    DEPTH_SUFFIX,
    IMAGES_PREFIX,
    STATE_KEY,
    action_feature,
    camera_feature,
    depth_feature,
    state_feature,
)
from rlctl.domain.action_guard import ActionGuard, ActionLimits
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported
from rlctl.domain.features import FeatureSpec

log = structlog.get_logger(__name__)

ROBOT_TYPE = "lekiwi_client"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _zmq() -> Any:
    try:
        import zmq
    except ImportError as error:
        raise NotSupported(
            "pyzmq is not installed", where="lekiwi client", hint="pip install 'rlctl[zmq]'"
        ) from error
    return zmq


class LeKiwiClient:
    def __init__(self, config: LeKiwiClientConfig) -> None:
        self.config = config
        self._sizes = {name: camera.frame_size(name) for name, camera in config.cameras.items()}
        # The cameras whose depth the host sends too (asked as LeRobot's robots ask it).
        self._depth = [
            name for name, camera in config.cameras.items() if getattr(camera, "use_depth", False)
        ]
        self._depth_frames: dict[str, np.ndarray] = {}
        # The cameras whose colour the host sends (all but a depth-only RealSense).
        self._color = [
            name for name, camera in config.cameras.items() if getattr(camera, "use_rgb", True)
        ]
        arm = ActionLimits.unbounded(STATE_NAMES[:6])
        base = base_limits(config)
        self._guard = ActionGuard(
            ActionLimits(
                STATE_NAMES,
                np.concatenate([arm.low, base.low]),
                np.concatenate([arm.high, base.high]),
            )
        )
        self._context: Any = None
        self._commands: Any = None
        self._observations: Any = None
        self._state: np.ndarray | None = None
        self._frames: dict[str, np.ndarray] = {}
        self._received_at = 0.0
        self.where = f"lekiwi_client {config.remote_ip}"

    @property
    def robot_type(self) -> str:
        return ROBOT_TYPE

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        features = {STATE_KEY: state_feature(STATE_NAMES)}
        for name, (height, width) in self._sizes.items():
            specs = [camera_feature(name, height, width)] if name in self._color else []
            if name in self._depth:
                specs.append(depth_feature(name, height, width))
            for spec in specs:
                features[spec.key] = spec
        return features

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(STATE_NAMES)}

    @property
    def realtime(self) -> bool:
        return True

    @property
    def is_connected(self) -> bool:
        return self._context is not None

    def _address(self, port: int) -> str:
        return f"tcp://{self.config.remote_ip}:{port}"

    def _hint(self) -> str:
        return (
            "start the host on the robot (`rlctl lekiwi-host --robot.id=...`, or LeRobot's "
            "`python -m lerobot.robots.lekiwi.lekiwi_host`), and check remote_ip, the ports "
            f"({self.config.port_zmq_cmd}, {self.config.port_zmq_observations}) and the network"
        )

    def connect(self) -> None:
        if self._context is not None:
            return
        zmq = _zmq()
        self._context = zmq.Context()
        try:
            self._commands = self._context.socket(zmq.PUSH)
            self._commands.setsockopt(zmq.LINGER, 0)
            self._commands.setsockopt(zmq.CONFLATE, 1)
            self._observations = self._context.socket(zmq.PULL)
            self._observations.setsockopt(zmq.LINGER, 0)
            self._observations.setsockopt(zmq.RCVHWM, 2)
            try:
                self._commands.connect(self._address(self.config.port_zmq_cmd))
                self._observations.connect(self._address(self.config.port_zmq_observations))
            except zmq.ZMQError as error:
                raise HardwareError(
                    f"cannot connect to {self.config.remote_ip}: {error}",
                    where=self.where,
                    hint="remote_ip is the robot's IP address or host name",
                ) from error
            if not self._observations.poll(int(self.config.connect_timeout_s * 1000)):
                raise HardwareError(
                    "no observation from the LeKiwi host at "
                    f"{self._address(self.config.port_zmq_observations)} within "
                    f"{self.config.connect_timeout_s:g} s",
                    where=self.where,
                    hint=self._hint(),
                )
            self._receive(wait_ms=0)
        except BaseException:
            self.disconnect()
            raise

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []  # the arm is calibrated on the robot: `rlctl calibrate --robot.type=lekiwi`

    def reset(self) -> None:
        self._guard.begin_episode()

    @property
    def episode_over(self) -> bool:
        return False

    def get_observation(self) -> dict[str, Any]:
        self._require_connected()
        self._receive(wait_ms=self.config.polling_timeout_ms)
        silent = time.monotonic() - self._received_at
        if silent > self.config.observation_timeout_s:
            raise HardwareError(
                f"no observation from the LeKiwi host for {silent:.1f} s: it stopped or the "
                "network dropped",
                where=self.where,
                hint=self._hint(),
            )
        assert self._state is not None
        observation: dict[str, Any] = {STATE_KEY: self._state.copy()}
        for name in self._sizes:
            if name in self._color:
                frame = self._frames.get(name)
                if frame is None:
                    raise HardwareError(
                        f"the host sends no frame of camera {name!r}",
                        where=self.where,
                        hint="the client's cameras must be the host's (same names and sizes)",
                    )
                observation[f"{IMAGES_PREFIX}{name}"] = frame
            if name in self._depth:
                depth = self._depth_frames.get(name)
                if depth is None:
                    raise HardwareError(
                        f"the host sends no depth of camera {name!r}",
                        where=self.where,
                        hint="the host's camera must have use_depth: true (an rlctl host: "
                        "LeRobot's LeKiwi host sends no depth), or set use_depth: false here",
                    )
                observation[f"{IMAGES_PREFIX}{name}{DEPTH_SUFFIX}"] = depth.copy()
        return observation

    def send_action(self, action: np.ndarray) -> np.ndarray:
        self._require_connected()
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        if values.shape != (len(STATE_NAMES),):
            raise InvalidInput(
                f"a LeKiwi action has {len(STATE_NAMES)} values ({', '.join(STATE_NAMES)}), "
                f"got {values.size}",
                where=self.where,
            )
        decision = self._guard(values)
        sent = decision.values
        if decision.held or sent is None:
            if decision.first_hold:
                log.warning(
                    "action refused: arm held, base stopped",
                    robot=ROBOT_TYPE,
                    reason=decision.reason,
                    note="said once per episode",
                )
            arm = sent[:6] if sent is not None else self._state_arm()
            if arm is None:
                return np.zeros(len(STATE_NAMES), dtype=np.float32)
            sent = np.concatenate([arm, np.zeros(len(BASE_NAMES))]).astype(np.float32)
        message = json.dumps({name: float(v) for name, v in zip(STATE_NAMES, sent, strict=True)})
        zmq = _zmq()
        # Not taken yet: the newest command replaces it (CONFLATE).
        with contextlib.suppress(zmq.Again):
            self._commands.send_string(message, flags=zmq.NOBLOCK)
        return np.asarray(sent, dtype=np.float32)

    def disconnect(self) -> None:
        for name in ("_commands", "_observations"):
            socket = getattr(self, name)
            if socket is not None:
                socket.close(linger=0)
                setattr(self, name, None)
        context, self._context = self._context, None
        if context is not None:
            context.term()

    # Observations

    def _state_arm(self) -> np.ndarray | None:
        return None if self._state is None else self._state[:6]

    def _require_connected(self) -> None:
        if self._context is None:
            raise HardwareError(
                "the LeKiwi client is not connected", where=self.where, hint="connect it first"
            )

    def _receive(self, *, wait_ms: int) -> None:
        """Take the newest observation the host sent (waiting up to `wait_ms` for one)."""
        zmq = _zmq()
        if not self._observations.poll(wait_ms):
            return
        latest = None
        while True:
            try:
                latest = self._observations.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
        if latest is not None:
            self._parse(latest)

    def _parse(self, parts: list[bytes]) -> None:
        import cv2

        try:
            header = json.loads(parts[0])
            cameras, state = _header_contents(header)
            depths = self._decode_depths(header.get(DEPTH_KEY))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as error:
            # The last good observation stays (until `observation_timeout_s`).
            log.warning("malformed observation dropped", error=str(error))
            return
        for name, jpeg in zip(cameras, parts[1:], strict=False):
            if name not in self._sizes or not jpeg:
                continue
            # The size from the JPEG's header, before decoding (a hostile host could claim any).
            size = picture_size(jpeg)
            if size is None:
                continue
            if size[::-1] != self._sizes[name]:
                height, width = self._sizes[name]
                raise HardwareError(
                    f"the host's camera {name!r} sends {size[0]}x{size[1]} frames, the client "
                    f"declares {width}x{height}",
                    where=self.where,
                    hint="give the client's cameras the host's sizes",
                )
            frame = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            if frame is None or frame.shape[:2] != self._sizes[name]:
                continue
            self._frames[name] = frame
        self._depth_frames.update(depths)
        self._state = state
        self._received_at = time.monotonic()

    def _decode_depths(self, sent: Any) -> dict[str, np.ndarray]:
        """The depth images of the header's `_depth` that this client wants; ValueError for one
        that does not decode (the whole observation is dropped, never colour without its
        depth), HardwareError for one of the wrong kind or size."""
        import cv2

        if not self._depth or sent is None:
            return {}
        if not isinstance(sent, dict):
            raise ValueError(f"{DEPTH_KEY} is not a mapping")
        depths = {}
        for name in self._depth:
            text = sent.get(f"{name}{DEPTH_SUFFIX}")
            if text is None:
                continue
            try:
                png = base64.b64decode(text, validate=True)
            except (binascii.Error, TypeError) as error:
                raise ValueError(f"the depth of {name!r} is not base64: {error}") from error
            if png[:8] != PNG_SIGNATURE or len(png) < 24:
                raise ValueError(f"the depth of {name!r} is not a PNG image")
            # The size from the PNG's header, before decoding: a wrong one is refused without
            # allocating it (a hostile host could claim any size).
            width, height = struct.unpack(">II", png[16:24])
            if (height, width) != self._sizes[name]:
                expected_h, expected_w = self._sizes[name]
                raise HardwareError(
                    f"the host's camera {name!r} sends {width}x{height} depth, the client "
                    f"declares {expected_w}x{expected_h}",
                    where=self.where,
                    hint="give the client's cameras the host's sizes",
                )
            image = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
            if image is None:
                raise ValueError(f"the depth of {name!r} is not a PNG image")
            if image.dtype != np.uint16 or image.ndim != 2:
                raise HardwareError(
                    f"the host sends the depth of camera {name!r} as {image.dtype} "
                    f"{image.shape}, not 16-bit single-channel",
                    where=self.where,
                    hint="run the host and the client from the same rlctl version",
                )
            if image.shape != self._sizes[name]:
                height, width = self._sizes[name]
                raise HardwareError(
                    f"the host's camera {name!r} sends {image.shape[1]}x{image.shape[0]} "
                    f"depth, the client declares {width}x{height}",
                    where=self.where,
                    hint="give the client's cameras the host's sizes",
                )
            depths[name] = image[..., None]
        return depths


def lekiwi_client(
    config: LeKiwiClientConfig, *, calibration_store: CalibrationStore | None = None
) -> LeKiwiClient:
    return LeKiwiClient(config)


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _header_contents(header: Any) -> tuple[list[str], np.ndarray]:
    """The camera names and the state of an observation's JSON header; ValueError for one that
    is not the host's (a state value missing, not a number, or not finite: the arm's last
    known position is what a held action sends back)."""
    if not isinstance(header, dict):
        raise ValueError(f"the header is {type(header).__name__}, not an object")
    cameras = header.get("_cams")
    if not isinstance(cameras, list) or not all(isinstance(c, str) for c in cameras):
        raise ValueError("the header's _cams is not a list of camera names")
    values = []
    for name in STATE_NAMES:
        value = header.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"the header's {name} is {type(value).__name__}, not a number")
        try:
            number = float(value)
        except OverflowError:  # an integer past float's range
            number = math.inf
        if not abs(number) <= FLOAT32_MAX:  # NaN, infinite, or so in float32 (the state's)
            raise ValueError(f"the header's {name} is {value!r}, not a finite number")
        values.append(number)
    return cameras, np.asarray(values, np.float32)
