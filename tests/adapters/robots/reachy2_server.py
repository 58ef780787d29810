# ruff: noqa: N802  (the gRPC servicers' method names are the API's)
"""An emulated Reachy 2: a real `grpc.server` on localhost speaking Reachy 2's SDK and video API
through the generated servicer base classes, with its joints in radians as the robot keeps them.

What it serves is what Pollen's `reachy2_sdk` calls at connect and while reading or commanding
joints, the base and the cameras: `ReachyService` (GetReachy, GetReachyState,
StreamReachyState, SendComponentsCommands, Audit), the arms', head's and hands' TurnOn /
TurnOff / speed and torque limits, the base's odometry, mode and direction, and the video
service's camera list and JPEG frames. A commanded joint reaches its goal at once; the base's
measured velocity is the one last commanded.

Faults: `missing` parts are left out of the robot's description, `silent` parts out of its
state (a part not answering), `delay_s` slows every reply, `stop()` kills the server.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent import futures
from typing import Any

import cv2
import grpc
import numpy as np
from google.protobuf.empty_pb2 import Empty
from google.protobuf.timestamp_pb2 import Timestamp
from google.protobuf.wrappers_pb2 import BoolValue, FloatValue

from rlctl.adapters.robots.reachy2_api import (
    arm_pb2,
    arm_pb2_grpc,
    component_pb2,
    dynamixel_motor_pb2,
    hand_pb2,
    hand_pb2_grpc,
    head_pb2,
    head_pb2_grpc,
    kinematics_pb2,
    mobile_base_mobility_pb2,
    mobile_base_mobility_pb2_grpc,
    mobile_base_utility_pb2,
    mobile_base_utility_pb2_grpc,
    orbita2d_pb2,
    orbita3d_pb2,
    part_pb2,
    reachy_pb2,
    reachy_pb2_grpc,
    video_pb2,
    video_pb2_grpc,
)

PARTS = ("l_arm", "r_arm", "head", "l_hand", "r_hand", "mobile_base")
PART_IDS = {"r_arm": 1, "l_arm": 2, "head": 3, "r_hand": 4, "l_hand": 5, "mobile_base": 100}
ROLL, PITCH, YAW = 0, 1, 2


def _f(value: float) -> FloatValue:
    return FloatValue(value=value)


def _orbita2d_hardware() -> dict[str, Any]:
    """What a real Orbita2d reports beside its positions (reachy2_sdk builds its motors and axes
    from these fields, and reads `compliant` after them)."""
    motors = orbita2d_pb2.Float2d(motor_1=_f(100.0), motor_2=_f(100.0))
    vector = orbita2d_pb2.Vector2d(x=_f(0.0), y=_f(0.0))
    gains = component_pb2.PIDGains(p=_f(1.0), i=_f(0.0), d=_f(0.0))
    return {
        "present_speed": vector,
        "present_load": vector,
        "temperature": orbita2d_pb2.Float2d(motor_1=_f(30.0), motor_2=_f(30.0)),
        "speed_limit": motors,
        "torque_limit": motors,
        "pid": orbita2d_pb2.PID2d(motor_1=gains, motor_2=gains),
    }


def _orbita3d_hardware() -> dict[str, Any]:
    motors = orbita3d_pb2.Float3d(motor_1=_f(100.0), motor_2=_f(100.0), motor_3=_f(100.0))
    vector = orbita3d_pb2.Vector3d(x=_f(0.0), y=_f(0.0), z=_f(0.0))
    gains = component_pb2.PIDGains(p=_f(1.0), i=_f(0.0), d=_f(0.0))
    return {
        "present_speed": vector,
        "present_load": vector,
        "temperature": orbita3d_pb2.Float3d(motor_1=_f(30.0), motor_2=_f(30.0), motor_3=_f(30.0)),
        "speed_limit": motors,
        "torque_limit": motors,
        "pid": orbita3d_pb2.PID3d(motor_1=gains, motor_2=gains, motor_3=gains),
    }


def _dynamixel_hardware() -> dict[str, Any]:
    return {
        "present_speed": _f(0.0),
        "present_load": _f(0.0),
        "temperature": _f(30.0),
        "speed_limit": _f(100.0),
        "torque_limit": _f(100.0),
        "pid": component_pb2.PIDGains(p=_f(1.0), i=_f(0.0), d=_f(0.0)),
    }


class EmulatedReachy:
    """The robot's state, shared by the services (radians; the base in m/s and rad/s)."""

    def __init__(self, *, missing: tuple[str, ...] = (), silent: tuple[str, ...] = ()) -> None:
        self.lock = threading.Lock()
        self.missing = set(missing)
        self.silent = set(silent)
        self.delay_s = 0.0
        self.joints: dict[tuple[str, str, str], float] = {}
        for side_index, side in enumerate(("l", "r")):
            for i, (component, axis) in enumerate(
                (
                    ("shoulder", "pitch"),
                    ("shoulder", "roll"),
                    ("elbow", "yaw"),
                    ("elbow", "pitch"),
                    ("wrist", "roll"),
                    ("wrist", "pitch"),
                    ("wrist", "yaw"),
                )
            ):
                self.joints[(f"{side}_arm", component, axis)] = (
                    0.05 * (i + 1) * (1 - 2 * side_index)
                )
            self.joints[(f"{side}_hand", "gripper", "")] = 0.3 + 0.1 * side_index
        for i, axis in enumerate(("yaw", "pitch", "roll")):
            self.joints[("head", "neck", axis)] = -0.02 * (i + 1)
        self.joints[("head", "l_antenna", "")] = 0.1
        self.joints[("head", "r_antenna", "")] = -0.1
        self.goals = dict(self.joints)
        self.direction = (0.0, 0.0, 0.0)
        self.on: dict[str, bool] = dict.fromkeys(PARTS, False)
        self.calls: list[str] = []
        self.commands: list[dict[tuple[str, str, str], float]] = []
        self.directions: list[tuple[float, float, float]] = []
        self.zuuu_mode = 0
        # What the video server sends instead of its pictures (a broken or hostile server).
        self.frame_data: bytes | None = None

    def called(self, name: str) -> None:
        with self.lock:
            self.calls.append(name)
        if self.delay_s:
            time.sleep(self.delay_s)

    # Messages

    def description(self) -> reachy_pb2.Reachy:
        def orbita2d(name: str, ident: int, axes: tuple[int, int]) -> orbita2d_pb2.Orbita2d:
            return orbita2d_pb2.Orbita2d(
                id=component_pb2.ComponentId(id=ident, name=name), axis_1=axes[0], axis_2=axes[1]
            )

        def arm(side: str) -> arm_pb2.Arm:
            base = PART_IDS[f"{side}_arm"] * 10
            return arm_pb2.Arm(
                part_id=part_pb2.PartId(id=PART_IDS[f"{side}_arm"], name=f"{side}_arm"),
                description=arm_pb2.ArmDescription(
                    shoulder=orbita2d(f"{side}_shoulder", base + 1, (PITCH, ROLL)),
                    elbow=orbita2d(f"{side}_elbow", base + 2, (YAW, PITCH)),
                    wrist=orbita3d_pb2.Orbita3d(
                        id=component_pb2.ComponentId(id=base + 3, name=f"{side}_wrist")
                    ),
                ),
            )

        fields: dict[str, Any] = {
            "id": reachy_pb2.ReachyId(id=1, name="reachy"),
            "info": reachy_pb2.ReachyInfo(
                serial_number="emulated",
                core_mode=reachy_pb2.ReachyCoreMode.Value("FAKE"),
                api_version="1.0.21",
            ),
            "l_arm": arm("l"),
            "r_arm": arm("r"),
            "head": head_pb2.Head(
                part_id=part_pb2.PartId(id=PART_IDS["head"], name="head"),
                description=head_pb2.HeadDescription(
                    neck=orbita3d_pb2.Orbita3d(id=component_pb2.ComponentId(id=31, name="neck")),
                    l_antenna=dynamixel_motor_pb2.DynamixelMotor(
                        id=component_pb2.ComponentId(id=32, name="antenna_left")
                    ),
                    r_antenna=dynamixel_motor_pb2.DynamixelMotor(
                        id=component_pb2.ComponentId(id=33, name="antenna_right")
                    ),
                ),
            ),
            "mobile_base": mobile_base_utility_pb2.MobileBase(
                part_id=part_pb2.PartId(id=PART_IDS["mobile_base"], name="mobile_base")
            ),
        }
        for side in ("l", "r"):
            fields[f"{side}_hand"] = hand_pb2.Hand(
                part_id=part_pb2.PartId(id=PART_IDS[f"{side}_hand"], name=f"{side}_hand"),
                type=hand_pb2.HandType.Value("PARALLEL_GRIPPER"),
            )
        for part in self.missing:
            fields.pop(part, None)
        return reachy_pb2.Reachy(**fields)

    def state(self) -> reachy_pb2.ReachyState:
        with self.lock:
            present, goals = dict(self.joints), dict(self.goals)
            on = dict(self.on)
        now = Timestamp()
        now.GetCurrentTime()

        def pose2d(values: dict, side: str, component: str, axes: tuple[str, str]):
            return orbita2d_pb2.Pose2d(
                axis_1=_f(values[(side, component, axes[0])]),
                axis_2=_f(values[(side, component, axes[1])]),
            )

        def rotation(values: dict, part: str, component: str):
            return kinematics_pb2.Rotation3d(
                rpy=kinematics_pb2.ExtEulerAngles(
                    roll=_f(values[(part, component, "roll")]),
                    pitch=_f(values[(part, component, "pitch")]),
                    yaw=_f(values[(part, component, "yaw")]),
                )
            )

        def arm_state(side: str) -> arm_pb2.ArmState:
            part = f"{side}_arm"
            return arm_pb2.ArmState(
                timestamp=now,
                id=part_pb2.PartId(id=PART_IDS[part], name=part),
                activated=True,
                shoulder_state=orbita2d_pb2.Orbita2dState(
                    present_position=pose2d(present, part, "shoulder", ("pitch", "roll")),
                    goal_position=pose2d(goals, part, "shoulder", ("pitch", "roll")),
                    compliant=BoolValue(value=not on[part]),
                    **_orbita2d_hardware(),
                ),
                elbow_state=orbita2d_pb2.Orbita2dState(
                    present_position=pose2d(present, part, "elbow", ("yaw", "pitch")),
                    goal_position=pose2d(goals, part, "elbow", ("yaw", "pitch")),
                    compliant=BoolValue(value=not on[part]),
                    **_orbita2d_hardware(),
                ),
                wrist_state=orbita3d_pb2.Orbita3dState(
                    present_position=rotation(present, part, "wrist"),
                    goal_position=rotation(goals, part, "wrist"),
                    compliant=BoolValue(value=not on[part]),
                    **_orbita3d_hardware(),
                ),
            )

        def hand_state(side: str) -> hand_pb2.HandState:
            part = f"{side}_hand"

            def position(values: dict) -> hand_pb2.HandPosition:
                return hand_pb2.HandPosition(
                    parallel_gripper=hand_pb2.ParallelGripperPosition(
                        # `position` and `opening_percentage` are a oneof: the SDK reads
                        # `position` (radians).
                        position=_f(values[(part, "gripper", "")]),
                    )
                )

            return hand_pb2.HandState(
                opening=_f(present[(part, "gripper", "")] / 2.0),
                present_position=position(present),
                goal_position=position(goals),
                compliant=BoolValue(value=not on[part]),
            )

        def antenna(name: str) -> dynamixel_motor_pb2.DynamixelMotorState:
            return dynamixel_motor_pb2.DynamixelMotorState(
                present_position=_f(present[("head", name, "")]),
                goal_position=_f(goals[("head", name, "")]),
                compliant=BoolValue(value=not on["head"]),
                **_dynamixel_hardware(),
            )

        fields: dict[str, Any] = {
            "timestamp": now,
            "id": reachy_pb2.ReachyId(id=1, name="reachy"),
            "l_arm_state": arm_state("l"),
            "r_arm_state": arm_state("r"),
            "l_hand_state": hand_state("l"),
            "r_hand_state": hand_state("r"),
            "head_state": head_pb2.HeadState(
                timestamp=now,
                id=part_pb2.PartId(id=PART_IDS["head"], name="head"),
                activated=True,
                neck_state=orbita3d_pb2.Orbita3dState(
                    present_position=rotation(present, "head", "neck"),
                    goal_position=rotation(goals, "head", "neck"),
                    compliant=BoolValue(value=not on["head"]),
                    **_orbita3d_hardware(),
                ),
                l_antenna_state=antenna("l_antenna"),
                r_antenna_state=antenna("r_antenna"),
            ),
            "mobile_base_state": mobile_base_utility_pb2.MobileBaseState(
                timestamp=now,
                id=part_pb2.PartId(id=PART_IDS["mobile_base"], name="mobile_base"),
                activated=True,
                battery_level=mobile_base_utility_pb2.BatteryLevel(level=_f(25.0)),
                zuuu_mode=mobile_base_utility_pb2.ZuuuModeCommand(mode=self.zuuu_mode or 1),
            ),
        }
        for part in self.missing | self.silent:
            fields.pop(f"{part}_state", None)
        return reachy_pb2.ReachyState(**fields)

    # Commands

    def take(self, commands: reachy_pb2.ReachyComponentsCommands) -> None:
        goals: dict[tuple[str, str, str], float] = {}
        for side in ("l", "r"):
            part = f"{side}_arm"
            if commands.HasField(f"{part}_commands"):
                arm = getattr(commands, f"{part}_commands")
                for component, axes in (
                    ("shoulder", ("pitch", "roll")),
                    ("elbow", ("yaw", "pitch")),
                ):
                    for cmd in getattr(arm, f"{component}_command").cmd:
                        for key, axis in zip(("axis_1", "axis_2"), axes, strict=True):
                            if cmd.goal_position.HasField(key):
                                goals[(part, component, axis)] = getattr(
                                    cmd.goal_position, key
                                ).value
                for cmd in arm.wrist_command.cmd:
                    for axis in ("roll", "pitch", "yaw"):
                        if cmd.goal_position.rpy.HasField(axis):
                            goals[(part, "wrist", axis)] = getattr(
                                cmd.goal_position.rpy, axis
                            ).value
            if commands.HasField(f"{side}_hand_commands"):
                position = getattr(commands, f"{side}_hand_commands").position.parallel_gripper
                goals[(f"{side}_hand", "gripper", "")] = position.position.value
        if commands.HasField("head_commands"):
            head = commands.head_commands
            for cmd in head.neck_command.cmd:
                for axis in ("roll", "pitch", "yaw"):
                    if cmd.goal_position.rpy.HasField(axis):
                        goals[("head", "neck", axis)] = getattr(cmd.goal_position.rpy, axis).value
            for name in ("l_antenna", "r_antenna"):
                for cmd in getattr(head, f"{name}_command").cmd:
                    goals[("head", name, "")] = cmd.goal_position.value
        with self.lock:
            self.commands.append(goals)
            for key, value in goals.items():
                if self.on[key[0]]:
                    self.goals[key] = value
                    self.joints[key] = value  # the emulated motors reach their goal at once

    def degrees(self, part: str, component: str, axis: str = "") -> float:
        with self.lock:
            return math.degrees(self.joints[(part, component, axis)])


class _Reachy(reachy_pb2_grpc.ReachyServiceServicer):
    def __init__(self, robot: EmulatedReachy) -> None:
        self.robot = robot

    def GetReachy(self, request, context):
        self.robot.called("GetReachy")
        return self.robot.description()

    def GetReachyState(self, request, context):
        self.robot.called("GetReachyState")
        return self.robot.state()

    def StreamReachyState(self, request, context):
        period = 1.0 / max(1.0, min(request.publish_frequency or 100.0, 200.0))
        while context.is_active():
            yield self.robot.state()
            time.sleep(period)

    def SendComponentsCommands(self, request, context):
        self.robot.called("SendComponentsCommands")
        self.robot.take(request)
        return Empty()

    def Audit(self, request, context):
        time.sleep(0.05)  # the SDK audits in a loop
        return reachy_pb2.ReachyStatus()


class _PartCalls:
    part_kind = ""

    def __init__(self, robot: EmulatedReachy) -> None:
        self.robot = robot

    def _part(self, part_id) -> str:
        return {v: k for k, v in PART_IDS.items()}.get(part_id.id, part_id.name)

    def _switch(self, request, context, on: bool, name: str):
        part = self._part(request)
        self.robot.called(f"{name} {part}")
        if part in self.robot.silent:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{part} does not answer")
        with self.robot.lock:
            self.robot.on[part] = on
        return Empty()

    def TurnOn(self, request, context):
        return self._switch(request, context, True, "TurnOn")

    def TurnOff(self, request, context):
        return self._switch(request, context, False, "TurnOff")

    def SetSpeedLimit(self, request, context):
        self.robot.called(f"SetSpeedLimit {self._part(request.id)} {request.limit}")
        return Empty()

    def SetTorqueLimit(self, request, context):
        self.robot.called(f"SetTorqueLimit {self._part(request.id)} {request.limit}")
        return Empty()


class _Arm(_PartCalls, arm_pb2_grpc.ArmServiceServicer):
    pass


class _Head(_PartCalls, head_pb2_grpc.HeadServiceServicer):
    pass


class _Hand(_PartCalls, hand_pb2_grpc.HandServiceServicer):
    def SetHandPosition(self, request, context):
        self.robot.called("SetHandPosition")
        part = self._part(request.id)
        with self.robot.lock:
            value = request.position.parallel_gripper.position.value
            self.robot.goals[(part, "gripper", "")] = self.robot.joints[(part, "gripper", "")] = (
                value
            )
        return Empty()


class _BaseUtility(_PartCalls, mobile_base_utility_pb2_grpc.MobileBaseUtilityServiceServicer):
    def GetOdometry(self, request, context):
        self.robot.called("GetOdometry")
        if "mobile_base" in self.robot.silent:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the mobile base does not answer")
        vx, vy, vtheta = self.robot.direction
        return mobile_base_utility_pb2.OdometryVector(
            x=_f(0.0), y=_f(0.0), theta=_f(0.0), vx=_f(vx), vy=_f(vy), vtheta=_f(vtheta)
        )

    def SetZuuuMode(self, request, context):
        self.robot.called(f"SetZuuuMode {request.mode}")
        self.robot.zuuu_mode = request.mode
        return mobile_base_mobility_pb2.MobilityServiceAck(success=BoolValue(value=True))

    def GetState(self, request, context):
        return self.robot.state().mobile_base_state


class _Mobility(mobile_base_mobility_pb2_grpc.MobileBaseMobilityServiceServicer):
    def __init__(self, robot: EmulatedReachy) -> None:
        self.robot = robot

    def SendDirection(self, request, context):
        self.robot.called("SendDirection")
        d = request.direction
        direction = (d.x.value, d.y.value, d.theta.value)
        with self.robot.lock:
            self.robot.directions.append(direction)
            self.robot.direction = direction  # the base is in velocity mode (CMD_VEL)
        return mobile_base_mobility_pb2.MobilityServiceAck(success=BoolValue(value=True))

    def GetLastDirection(self, request, context):
        self.robot.called("GetLastDirection")
        x, y, theta = self.robot.direction
        return mobile_base_mobility_pb2.DirectionVector(x=_f(x), y=_f(y), theta=_f(theta))


def camera_picture(view: int, width: int = 640, height: int = 480) -> np.ndarray:
    """The BGR picture the emulated camera sends for a view: blue left, red right, green depth."""
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    frame[..., view % 3] = 200
    frame[: height // 2, : width // 2] = 40
    return frame


class _Video(video_pb2_grpc.VideoServiceServicer):
    def __init__(self, robot: EmulatedReachy) -> None:
        self.robot = robot

    def GetAvailableCameras(self, request, context):
        self.robot.called("GetAvailableCameras")
        cameras = []
        if "teleop_camera" not in self.robot.missing:
            cameras.append(video_pb2.CameraFeatures(name="teleop_head", stereo=True))
        if "depth_camera" not in self.robot.missing:
            cameras.append(video_pb2.CameraFeatures(name="depth_camera", depth=True))
        return video_pb2.ListOfCameraFeatures(camera_feat=cameras)

    def GetFrame(self, request, context):
        self.robot.called("GetFrame")
        now = Timestamp()
        now.GetCurrentTime()
        if self.robot.frame_data is not None:
            return video_pb2.Frame(timestamp=now, data=self.robot.frame_data)
        ok, data = cv2.imencode(".jpg", camera_picture(int(request.view)))
        assert ok
        return video_pb2.Frame(timestamp=now, data=data.tobytes())


class ReachyServer:
    """The emulated robot behind a real gRPC server on 127.0.0.1 (one port for the SDK and video
    services: point `sdk_port` and `port` at it)."""

    def __init__(self, robot: EmulatedReachy | None = None) -> None:
        self.robot = robot or EmulatedReachy()
        self._server: grpc.Server | None = None
        self.port = 0

    def start(self, port: int = 0) -> ReachyServer:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        reachy_pb2_grpc.add_ReachyServiceServicer_to_server(_Reachy(self.robot), server)
        arm_pb2_grpc.add_ArmServiceServicer_to_server(_Arm(self.robot), server)
        head_pb2_grpc.add_HeadServiceServicer_to_server(_Head(self.robot), server)
        hand_pb2_grpc.add_HandServiceServicer_to_server(_Hand(self.robot), server)
        mobile_base_utility_pb2_grpc.add_MobileBaseUtilityServiceServicer_to_server(
            _BaseUtility(self.robot), server
        )
        mobile_base_mobility_pb2_grpc.add_MobileBaseMobilityServiceServicer_to_server(
            _Mobility(self.robot), server
        )
        video_pb2_grpc.add_VideoServiceServicer_to_server(_Video(self.robot), server)
        self.port = server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace=None).wait(timeout=5)

    def __enter__(self) -> ReachyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
