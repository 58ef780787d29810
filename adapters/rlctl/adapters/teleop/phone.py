"""The phone as LeRobot 0.6.1's `phone` teleoperator (Android), driving an arm through inverse
kinematics.

Android: the `teleop` package (LeRobot's `phone` extra) serves its WebXR page and a websocket
`/ws` over HTTPS on the local network; the page in the phone's Chrome sends
`{"type": "pose", "data": {position, orientation, move, scale, reservedButtonA, ...}}` about a
hundred times a second. The package's own `Teleop` turns those into a 4x4 pose (its frame
conversion, pose-jump protection and scale); rlctl runs that same object in process, under its
own uvicorn server so that it can be stopped. From there, LeRobot's `AndroidPhone` arithmetic:
the camera offset, the calibration pose captured at the first touch of the move button
(`phone.pos`, `phone.rot` relative to it), its position re-captured at each press, giving
LeRobot's action `phone.pos`, `phone.rot` (a scipy rotation), `phone.raw_inputs`,
`phone.enabled` (`AndroidPhone.read`).

The teleoperator then runs LeRobot's phone_to_so100 steps on the robot's joints:
`MapPhoneActionToRobotAction`, `EEReferenceAndDelta`, `EEBoundsAndSafety`,
`GripperVelocityToJoint`, `InverseKinematicsEEToJoints`, and returns joint goals
(`<motor>.pos`), which the robot's safety guard checks as any other action.

iOS goes through HEBI's closed Mobile I/O library: refused.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from scipy.spatial.transform import Rotation

from rlctl.adapters.kinematics.ee_steps import (
    EEBoundsAndSafety,
    EEReferenceAndDelta,
    EEToJointsPipeline,
    GripperVelocityToJoint,
    InverseKinematicsEEToJoints,
)
from rlctl.adapters.kinematics.robot_kinematics import RobotKinematics
from rlctl.adapters.teleop.ee_arm import joints_from_state
from rlctl.application.ports.robot import ACTION_KEY
from rlctl.application.robot_features import action_feature
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput, NotSupported

if TYPE_CHECKING:
    from rlctl.adapters.teleop.config import PhoneConfig
    from rlctl.application.ports.robot import CalibrationStore, CalibrationTarget
    from rlctl.domain.features import FeatureSpec

logger = logging.getLogger(__name__)

TELEOP_TYPE = "phone"
WHERE = "teleop.type=phone"
INSTALL_HINT = "install the phone extra: `uv sync --extra phone` (or pip install 'rlctl[phone]')"
START_TIMEOUT_S = 10.0


@attrs.define
class MapPhoneActionToRobotAction:
    """LeRobot's step: the phone's pose to a relative end-effector command (axes swapped and
    inverted for the SO arms), the gripper velocity from the buttons (Android: A - B)."""

    platform: str = "android"

    def action(self, action: dict[str, Any], observation: Mapping[str, Any]) -> dict[str, Any]:
        enabled = bool(action.pop("phone.enabled"))
        pos = action.pop("phone.pos")
        rot = action.pop("phone.rot")
        inputs = action.pop("phone.raw_inputs")
        if pos is None or rot is None:
            raise InvalidInput(
                "the phone's action has no pose", where="MapPhoneActionToRobotAction"
            )
        rotvec = rot.as_rotvec()
        if self.platform == "ios":
            gripper_vel = float(inputs.get("a3", 0.0))
        else:
            gripper_vel = float(inputs.get("reservedButtonA", 0.0)) - float(
                inputs.get("reservedButtonB", 0.0)
            )
        action["enabled"] = enabled
        action["target_x"] = -pos[1] if enabled else 0.0
        action["target_y"] = pos[0] if enabled else 0.0
        action["target_z"] = pos[2] if enabled else 0.0
        action["target_wx"] = rotvec[1] if enabled else 0.0
        action["target_wy"] = rotvec[0] if enabled else 0.0
        action["target_wz"] = -rotvec[2] if enabled else 0.0
        action["gripper_vel"] = gripper_vel
        return action

    def reset(self) -> None:
        pass


def _teleop_package() -> Any:
    try:
        teleop = importlib.import_module("teleop")
        uvicorn = importlib.import_module("uvicorn")
    except ImportError as error:
        raise NotSupported(
            f"the Android phone needs the `teleop` package ({error})",
            where=WHERE,
            hint=INSTALL_HINT,
        ) from error
    return teleop, uvicorn


class AndroidPhone:
    """The `teleop` package's server, in process, and LeRobot's `AndroidPhone` arithmetic."""

    def __init__(
        self,
        camera_offset: Sequence[float] = (0.0, -0.02, 0.04),
        *,
        host: str = "0.0.0.0",
        port: int = 4443,
        message_timeout_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._offset = np.asarray(camera_offset, dtype=float)
        self._host, self._port = host, port
        self._message_timeout_s = message_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._latest_pose: np.ndarray | None = None
        self._latest_message: dict[str, Any] = {}
        self._latest_at = -np.inf
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._calib_pos: np.ndarray | None = None
        self._calib_rot_inv: Rotation | None = None
        self._enabled = False

    @property
    def is_connected(self) -> bool:
        return self._server is not None

    @property
    def is_calibrated(self) -> bool:
        return self._calib_pos is not None and self._calib_rot_inv is not None

    @property
    def port(self) -> int:
        """The port the server listens on (the one chosen when configured 0)."""
        server = self._server
        if server is not None and server.servers:
            return int(server.servers[0].sockets[0].getsockname()[1])
        return self._port

    @property
    def latest_message(self) -> dict[str, Any]:
        """The page's last pose message (`data`), as the `teleop` package passed it on."""
        with self._lock:
            return dict(self._latest_message)

    def start(self) -> None:
        if self._server is not None:
            return
        teleop, uvicorn = _teleop_package()
        package_dir = Path(teleop.__file__).parent
        package_logger = logging.getLogger("teleop")
        handlers = list(package_logger.handlers)
        session = teleop.Teleop(host=self._host, port=self._port)
        # Teleop() adds a handler on the stderr of the moment (a closed one, later, under a
        # test runner) and one more at every start: its lines go through rlctl's logging instead.
        package_logger.handlers[:] = handlers
        session.subscribe(self._on_pose)
        app = getattr(session, "_Teleop__app", None)
        if app is None:
            raise NotSupported(
                "this version of the `teleop` package does not expose its web app",
                where=WHERE,
                hint="install teleop 0.1.x (the phone extra pins it)",
            )
        config = uvicorn.Config(
            app,
            host=self._host,
            port=self._port,
            ssl_keyfile=str(package_dir / "key.pem"),
            ssl_certfile=str(package_dir / "cert.pem"),
            log_level="warning",
            # uvicorn's own configuration runs logging.config.dictConfig, which closes every
            # handler in the process (rlctl's, and absl's with the stream it holds).
            log_config=None,
        )
        server = uvicorn.Server(config)
        failure: list[BaseException] = []

        def serve() -> None:
            try:
                server.run()
            except BaseException as error:  # uvicorn exits (SystemExit) when it cannot bind
                failure.append(error)

        thread = threading.Thread(target=serve, name="phone-server", daemon=True)
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not server.started:
            server.should_exit = True
            thread.join(timeout=2.0)
            raise HardwareError(
                f"the phone's web server could not listen on {self._host}:{self._port}"
                + (f" ({failure[0]!r})" if failure else ""),
                where=WHERE,
                hint="another program (or rlctl) is using the port: stop it, or choose "
                "another with --teleop.port",
            )
        self._server, self._thread = server, thread
        logger.info("phone: open https://<this computer's IP>:%d in the phone's Chrome", self.port)

    def _on_pose(self, pose: np.ndarray, message: dict[str, Any]) -> None:
        # Called by the teleop package for every pose message (its server's thread).
        with self._lock:
            self._latest_pose = np.array(pose, dtype=float)
            self._latest_message = dict(message)
            self._latest_at = self._clock()

    def _current(self) -> tuple[np.ndarray, Rotation, dict[str, Any]] | None:
        with self._lock:
            if self._latest_pose is None:
                return None
            pose, message, at = (
                self._latest_pose.copy(),
                dict(self._latest_message),
                self._latest_at,
            )
        if not np.all(np.isfinite(pose)):
            return None
        try:
            rot = Rotation.from_matrix(pose[:3, :3])
        except ValueError:
            return None
        if self._clock() - at > self._message_timeout_s:
            message["move"] = False  # a silent phone is a released button
        return pose[:3, 3] - rot.apply(self._offset), rot, message

    def calibrate(self, timeout_s: float) -> None:
        """Wait for the first touch of the move button; that pose is the reference."""
        print(
            "Hold the phone so that: top edge points forward in same direction as the robot "
            "(robot +x) and screen points up (robot +z)"
        )
        print("Touch and move on the WebXR page to capture this pose...\n")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            current = self._current()
            if current is not None and bool(current[2].get("move", False)):
                pos, rot, _ = current
                self._calib_pos = pos.copy()
                self._calib_rot_inv = rot.inv()
                self._enabled = False
                print("Calibration done\n")
                return
            time.sleep(0.01)
        raise HardwareError(
            f"no touch of the move button came from the phone in {timeout_s:g} s",
            where=WHERE,
            hint=f"open https://<this computer's IP>:{self.port} in the phone's Chrome (same "
            "network; accept the self-signed certificate), start the AR session and hold the "
            "move button",
        )

    def read(self) -> dict[str, Any]:
        """LeRobot's phone action, or {} before a pose and the calibration."""
        current = self._current()
        if current is None or not self.is_calibrated:
            return {}
        raw_pos, raw_rot, msg = current
        assert self._calib_pos is not None and self._calib_rot_inv is not None
        raw_inputs: dict[str, Any] = {
            "move": bool(msg.get("move", False)),
            "scale": float(msg.get("scale", 1.0)),
            "reservedButtonA": bool(msg.get("reservedButtonA", False)),
            "reservedButtonB": bool(msg.get("reservedButtonB", False)),
        }
        enable = raw_inputs["move"]
        if enable and not self._enabled:
            self._calib_pos = raw_pos.copy()
        pos_cal = self._calib_rot_inv.apply(raw_pos - self._calib_pos)
        rot_cal = self._calib_rot_inv * raw_rot
        self._enabled = enable
        return {
            "phone.pos": pos_cal,
            "phone.rot": rot_cal,
            "phone.raw_inputs": raw_inputs,
            "phone.enabled": self._enabled,
        }

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout=5.0)
        with self._lock:
            self._latest_pose = None
            self._latest_message = {}
        self._calib_pos = self._calib_rot_inv = None
        self._enabled = False


class PhoneTeleop:
    def __init__(self, config: PhoneConfig, phone: AndroidPhone | None = None) -> None:
        if config.phone_os == "ios":
            raise NotSupported(
                "the iOS phone is not supported: LeRobot reaches it through HEBI's closed "
                "Mobile I/O library (hebi-py), which rlctl does not use",
                where="teleop.phone_os=ios",
                hint="use an Android phone with Chrome: --teleop.phone_os=android",
            )
        if config.urdf_path is None:
            raise ConfigError(
                "the phone needs the arm's URDF to turn its pose into joint goals",
                where="teleop.urdf_path",
                hint="--teleop.urdf_path=PATH/so101_new_calib.urdf (TheRobotStudio/SO-ARM100, "
                "folder Simulation/SO101)",
            )
        self._config = config
        self._motors = list(config.motor_names)
        self._kinematics = RobotKinematics(
            config.urdf_path, target_frame_name=config.target_frame_name, joint_names=self._motors
        )
        self._phone = phone or AndroidPhone(
            config.camera_offset,
            host=config.host,
            port=config.port,
            message_timeout_s=config.message_timeout_s,
        )
        sx, sy, sz = config.end_effector_step_sizes
        self._steps = EEToJointsPipeline(
            [
                MapPhoneActionToRobotAction(platform=config.phone_os),
                EEReferenceAndDelta(
                    self._kinematics,
                    {"x": sx, "y": sy, "z": sz},
                    self._motors,
                    use_latched_reference=True,
                ),
                EEBoundsAndSafety(
                    {
                        "min": list(config.end_effector_bounds_min),
                        "max": list(config.end_effector_bounds_max),
                    },
                    max_ee_step_m=config.max_ee_step_m,
                ),
                GripperVelocityToJoint(self._motors, speed_factor=config.gripper_speed_factor),
                InverseKinematicsEEToJoints(
                    self._kinematics, self._motors, initial_guess_current_joints=True
                ),
            ]
        )

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(f"{name}.pos" for name in self._motors)}

    @property
    def is_connected(self) -> bool:
        return self._phone.is_connected and self._phone.is_calibrated

    @property
    def phone(self) -> AndroidPhone:
        return self._phone

    def connect(self) -> None:
        if self.is_connected:
            return
        self._phone.start()
        try:
            self._phone.calibrate(self._config.calibration_timeout_s)
        except BaseException:
            self._phone.stop()
            raise

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        self._steps.reset()

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        if not self.is_connected:
            raise HardwareError(
                "the phone is not connected", where=WHERE, hint="connect the teleoperator first"
            )
        joints = joints_from_state(observation, self._motors, "the phone", WHERE)
        action: dict[str, Any] = self._phone.read()
        if not action:  # no pose yet: as released (the arm holds)
            action = {
                "phone.pos": np.zeros(3),
                "phone.rot": Rotation.identity(),
                "phone.raw_inputs": {},
                "phone.enabled": False,
            }
        action = self._steps(action, joints)
        return np.asarray([action[f"{name}.pos"] for name in self._motors], dtype=np.float32)

    def disconnect(self) -> None:
        self._phone.stop()


def phone(config: PhoneConfig, *, calibration_store: CalibrationStore | None = None) -> PhoneTeleop:
    return PhoneTeleop(config)
