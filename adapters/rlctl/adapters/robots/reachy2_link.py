"""Reachy 2's SDK server spoken over gRPC: what the `reachy2` robot and the
`reachy2_teleoperator` share (the joint table, reading the state, building commands, errors).

The calls are the ones Pollen's `reachy2_sdk` makes for what LeRobot 0.6.1 uses:
`ReachyService.GetReachy` (the parts and their ids), `GetReachyState` (every joint's present and
goal position), `SendComponentsCommands` (goal positions of arms, head and grippers), the parts'
`TurnOn` / `TurnOff` / `SetSpeedLimit` / `SetTorqueLimit`, the mobile base's `GetOdometry`,
`GetLastDirection`, `SetZuuuMode` and `SendDirection`. Angles are radians on the wire and
degrees in features (the SDK's `present_position`), the grippers too; the base's `vx`, `vy` are
m/s and `vtheta` deg/s (radians/s on the wire), as the SDK gives them to LeRobot.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs

from rlctl.domain.errors import HardwareError

# (feature name, part, component, axis) in LeRobot's order: neck, left arm, right arm, antennas.
# part: "head", "l_arm", "r_arm" (the gripper is the arm's hand, `l_hand` / `r_hand`).
NECK = (
    ("neck_yaw.pos", "head", "neck", "yaw"),
    ("neck_pitch.pos", "head", "neck", "pitch"),
    ("neck_roll.pos", "head", "neck", "roll"),
)
ANTENNAS = (
    ("l_antenna.pos", "head", "l_antenna", None),
    ("r_antenna.pos", "head", "r_antenna", None),
)


def _arm(side: str) -> tuple[tuple[str, str, str, str | None], ...]:
    arm = f"{side}_arm"
    return (
        (f"{side}_shoulder_pitch.pos", arm, "shoulder", "pitch"),
        (f"{side}_shoulder_roll.pos", arm, "shoulder", "roll"),
        (f"{side}_elbow_yaw.pos", arm, "elbow", "yaw"),
        (f"{side}_elbow_pitch.pos", arm, "elbow", "pitch"),
        (f"{side}_wrist_roll.pos", arm, "wrist", "roll"),
        (f"{side}_wrist_pitch.pos", arm, "wrist", "pitch"),
        (f"{side}_wrist_yaw.pos", arm, "wrist", "yaw"),
        (f"{side}_gripper.pos", f"{side}_hand", "gripper", None),
    )


L_ARM = _arm("l")
R_ARM = _arm("r")
VELOCITY_NAMES = ("mobile_base.vx", "mobile_base.vy", "mobile_base.vtheta")
# An Orbita2d's axes when the robot's description does not say (Reachy 2's arms).
DEFAULT_AXES = {"shoulder": ("pitch", "roll"), "elbow": ("yaw", "pitch")}
AXIS_NAMES = ("roll", "pitch", "yaw")  # the API's `Axis` enum, in its order
# Turning off smoothly: the SDK's three one-second steps of lower torque.
SMOOTH_OFF_STEPS = 3
SMOOTH_OFF_STEP_S = 1.0

Joint = tuple[str, str, str, str | None]


@attrs.frozen
class Parts:
    """Which parts a config uses (LeRobot's `with_*` flags)."""

    neck: bool
    l_arm: bool
    r_arm: bool
    antennas: bool
    mobile_base: bool

    @classmethod
    def of(cls, config: Any) -> Parts:
        return cls(
            neck=config.with_neck,
            l_arm=config.with_l_arm,
            r_arm=config.with_r_arm,
            antennas=config.with_antennas,
            mobile_base=config.with_mobile_base,
        )

    def joints(self) -> tuple[Joint, ...]:
        table: list[Joint] = []
        for used, rows in (
            (self.neck, NECK),
            (self.l_arm, L_ARM),
            (self.r_arm, R_ARM),
            (self.antennas, ANTENNAS),
        ):
            if used:
                table.extend(rows)
        return tuple(table)

    def names(self) -> tuple[str, ...]:
        joints = tuple(name for name, *_ in self.joints())
        return joints + (VELOCITY_NAMES if self.mobile_base else ())

    def api_parts(self) -> tuple[str, ...]:
        """The API's parts these need, each once, in the order they are turned on."""
        parts: list[str] = []
        for _, part, *_ in self.joints():
            if part not in parts:
                parts.append(part)
        if self.mobile_base:
            parts.append("mobile_base")
        return tuple(parts)


def api() -> _Api:
    """The generated modules (grpc and protobuf load when a Reachy is built)."""
    try:
        import grpc
    except ImportError as error:
        from rlctl.domain.errors import NotSupported

        raise NotSupported(
            "grpcio is not installed: Reachy 2 is spoken to over gRPC",
            where="reachy2",
            hint="pip install 'rlctl[reachy2]'",
        ) from error
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
        reachy_pb2,
        reachy_pb2_grpc,
    )

    return _Api(
        grpc=grpc,
        reachy=reachy_pb2,
        reachy_grpc=reachy_pb2_grpc,
        arm=arm_pb2,
        arm_grpc=arm_pb2_grpc,
        head=head_pb2,
        head_grpc=head_pb2_grpc,
        hand=hand_pb2,
        hand_grpc=hand_pb2_grpc,
        base=mobile_base_utility_pb2,
        base_grpc=mobile_base_utility_pb2_grpc,
        mobility=mobile_base_mobility_pb2,
        mobility_grpc=mobile_base_mobility_pb2_grpc,
        component=component_pb2,
        dynamixel=dynamixel_motor_pb2,
        kinematics=kinematics_pb2,
        orbita2d=orbita2d_pb2,
        orbita3d=orbita3d_pb2,
    )


@attrs.frozen
class _Api:
    grpc: Any
    reachy: Any
    reachy_grpc: Any
    arm: Any
    arm_grpc: Any
    head: Any
    head_grpc: Any
    hand: Any
    hand_grpc: Any
    base: Any
    base_grpc: Any
    mobility: Any
    mobility_grpc: Any
    component: Any
    dynamixel: Any
    kinematics: Any
    orbita2d: Any
    orbita3d: Any


# Which state of ReachyState each part's reading comes from.
STATE_FIELDS = {
    "head": "head_state",
    "l_arm": "l_arm_state",
    "r_arm": "r_arm_state",
    "l_hand": "l_hand_state",
    "r_hand": "r_hand_state",
    "mobile_base": "mobile_base_state",
}
PART_LABELS = {
    "head": "head (neck, antennas)",
    "l_arm": "left arm",
    "r_arm": "right arm",
    "l_hand": "left gripper",
    "r_hand": "right gripper",
    "mobile_base": "mobile base",
}
PART_FLAGS = {
    "head": "with_neck / with_antennas",
    "l_arm": "with_l_arm",
    "r_arm": "with_r_arm",
    "l_hand": "with_l_arm",
    "r_hand": "with_r_arm",
    "mobile_base": "with_mobile_base",
}


class PartUnanswered(Exception):
    """One part gave no usable answer (the part is `.part`, the reason the message)."""

    def __init__(self, part: str, reason: str, *, server_gone: bool = False) -> None:
        super().__init__(reason)
        self.part = part
        # The whole server does not answer (UNAVAILABLE), not just this part.
        self.server_gone = server_gone

    @classmethod
    def of(cls, part: str, error: BaseException) -> PartUnanswered:
        code = getattr(error, "code", None)
        gone = callable(code) and code().name == "UNAVAILABLE"
        return cls(part, rpc_reason(error), server_gone=gone)

    def describe(self, host: str, port: int) -> str:
        if self.server_gone:
            return f"the Reachy 2 SDK server at {host}:{port} does not answer ({self.part}): {self}"
        return f"the Reachy 2 at {host}:{port}: {self.part} does not answer: {self}"


def rpc_reason(error: BaseException) -> str:
    code = getattr(error, "code", None)
    name = code().name if callable(code) else type(error).__name__
    if name == "UNAVAILABLE":
        return "no server answering (UNAVAILABLE: nothing listens there, or it stopped)"
    if name == "DEADLINE_EXCEEDED":
        return "no answer in time (DEADLINE_EXCEEDED)"
    details = getattr(error, "details", None)
    text = details() if callable(details) else str(error)
    return f"{name}: {text}" if text else name


class Link:
    """One connection to a Reachy 2's SDK server: the robot's description, its state, commands."""

    def __init__(self, host: str, port: int, timeout_s: float, kind: str) -> None:
        self.api = api()
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.where = f"{kind} {host}:{port}"
        self.kind = kind
        self.channel: Any = None
        self.robot: Any = None
        self.axes: dict[tuple[str, str], tuple[str, str]] = {}

    @contextlib.contextmanager
    def connecting(self, connect_timeout_s: float) -> Iterator[None]:
        """The calls made while connecting (the description, the first state, turning the
        parts on) get the connect time, not one request's: a server busy starting up, or a
        loaded machine, answers them late once, and a tick's short limit is for afterwards."""
        tick_s = self.timeout_s
        self.timeout_s = max(tick_s, connect_timeout_s)
        try:
            yield
        finally:
            self.timeout_s = tick_s

    def hint(self) -> str:
        return (
            f"check the robot is on and its SDK server answers at {self.host}:{self.port} "
            f"(ip_address, sdk_port: reachy2_sdk's default port is 50051)"
        )

    def open(self, connect_timeout_s: float, parts: Iterable[str]) -> None:
        """Reach the server and check every part in `parts` is there and answers."""
        grpc = self.api.grpc
        self.channel = grpc.insecure_channel(f"{self.host}:{self.port}")
        try:
            grpc.channel_ready_future(self.channel).result(timeout=connect_timeout_s)
            with self.connecting(connect_timeout_s):
                self.robot = self._call(
                    self.api.reachy_grpc.ReachyServiceStub(self.channel).GetReachy,
                    _empty(),
                )
        except grpc.FutureTimeoutError:
            self.close()
            raise HardwareError(
                f"no Reachy 2 SDK server answering at {self.host}:{self.port} within "
                f"{connect_timeout_s:g} s",
                where=self.where,
                hint=self.hint(),
            ) from None
        except grpc.RpcError as error:
            self.close()
            raise HardwareError(
                f"the Reachy 2 SDK server at {self.host}:{self.port} does not describe the "
                f"robot (GetReachy): {rpc_reason(error)}",
                where=self.where,
                hint=self.hint(),
            ) from error
        for part in parts:
            if not self.robot.HasField(part):
                self.close()
                raise HardwareError(
                    f"the Reachy 2 at {self.host}:{self.port} has no {PART_LABELS[part]} ({part})",
                    where=self.where,
                    hint=f"set {PART_FLAGS[part]}=false to use the robot without it",
                )
        for component in ("shoulder", "elbow"):
            for side in ("l_arm", "r_arm"):
                self.axes[(side, component)] = self._axes(side, component)

    def _axes(self, side: str, component: str) -> tuple[str, str]:
        if not self.robot.HasField(side):
            return DEFAULT_AXES[component]
        orbita = getattr(getattr(self.robot, side).description, component)
        first, second = int(orbita.axis_1), int(orbita.axis_2)
        if first == second or max(first, second) >= len(AXIS_NAMES):
            return DEFAULT_AXES[component]  # the description leaves them out
        return AXIS_NAMES[first], AXIS_NAMES[second]

    def part_id(self, part: str) -> Any:
        return getattr(self.robot, part).part_id

    def close(self) -> None:
        channel, self.channel = self.channel, None
        if channel is not None:
            channel.close()

    def _call(self, method: Callable[..., Any], request: Any) -> Any:
        return method(request, timeout=self.timeout_s)

    # Reading

    def state(self, parts: Sequence[str]) -> Any:
        """The robot's state, each part in `parts` there; PartUnanswered otherwise."""
        stub = self.api.reachy_grpc.ReachyServiceStub(self.channel)
        try:
            state = self._call(stub.GetReachyState, self.robot.id)
        except self.api.grpc.RpcError as error:
            raise PartUnanswered.of("robot state (GetReachyState)", error) from error
        for part in parts:
            if part != "mobile_base" and not state.HasField(STATE_FIELDS[part]):
                raise PartUnanswered(PART_LABELS[part], "no state in the server's answer")
        return state

    def joint_values(self, state: Any, joints: Sequence[Joint], which: str) -> list[float]:
        """Each joint's `which` (present_position, goal_position) in degrees."""
        values: list[float] = []
        for _, part, component, axis in joints:
            radians = self._joint_radians(state, part, component, axis, which)
            values.append(math.degrees(radians) if radians is not None else math.nan)
        return values

    def _joint_radians(
        self, state: Any, part: str, component: str, axis: str | None, which: str
    ) -> float | None:
        if component == "gripper":
            hand = getattr(state, f"{part[0]}_hand_state")
            position = getattr(hand, which).parallel_gripper
            return position.position.value if position.HasField("position") else None
        part_state = getattr(state, STATE_FIELDS[part])
        component_state = getattr(part_state, f"{component}_state")
        if axis is None:  # an antenna: one Dynamixel motor
            field = getattr(component_state, which)
            return field.value if component_state.HasField(which) else None
        pose = getattr(component_state, which)
        if component in ("shoulder", "elbow"):
            first, _ = self.axes[(part, component)]
            key = "axis_1" if axis == first else "axis_2"
            return getattr(pose, key).value if pose.HasField(key) else None
        return getattr(pose.rpy, axis).value if pose.rpy.HasField(axis) else None

    def odometry(self) -> tuple[float, float, float]:
        """The base's measured vx, vy (m/s) and vtheta (deg/s)."""
        stub = self.api.base_grpc.MobileBaseUtilityServiceStub(self.channel)
        try:
            odom = self._call(stub.GetOdometry, self.part_id("mobile_base"))
        except self.api.grpc.RpcError as error:
            raise PartUnanswered.of(PART_LABELS["mobile_base"], error) from error
        return odom.vx.value, odom.vy.value, math.degrees(odom.vtheta.value)

    def last_direction(self) -> tuple[float, float, float]:
        """The base's last commanded vx, vy (m/s) and vtheta (deg/s)."""
        stub = self.api.mobility_grpc.MobileBaseMobilityServiceStub(self.channel)
        try:
            cmd = self._call(stub.GetLastDirection, self.part_id("mobile_base"))
        except self.api.grpc.RpcError as error:
            raise PartUnanswered.of(PART_LABELS["mobile_base"], error) from error
        return cmd.x.value, cmd.y.value, math.degrees(cmd.theta.value)

    # Commanding

    def turn_on(self, parts: Sequence[str]) -> None:
        """As the SDK's `turn_on` then LeRobot's `reset_default_limits`: slow, on, full limits."""
        joint_parts = [p for p in parts if p in ("l_arm", "r_arm", "head")]
        for part in joint_parts:
            self._limit(part, "SetSpeedLimit", 1)
        for part in [p for p in parts if p not in ("l_hand", "r_hand")]:
            self._part_call(part, "TurnOn", self.part_id(part))
            if part in ("l_arm", "r_arm"):
                hand = f"{part[0]}_hand"
                if self.robot.HasField(hand):
                    self._part_call(hand, "TurnOn", self.part_id(hand))
        for part in joint_parts:
            self._limit(part, "SetSpeedLimit", 100)
            self._limit(part, "SetTorqueLimit", 100)
        if "mobile_base" in parts:
            api = self.api
            mode = api.base.ZuuuModeCommand(
                id=self.part_id("mobile_base"), mode=api.base.ZuuuModePossiblities.Value("CMD_VEL")
            )
            self._part_call("mobile_base", "SetZuuuMode", mode)

    def turn_off_smoothly(self, parts: Sequence[str]) -> None:
        """As the SDK's `turn_off_smoothly` (LeRobot's `disable_torque_on_disconnect`): the arms'
        torque limit lowered from 50 % by 15 points a second for 3 s, so they sink instead of
        dropping, then off (their torque limit back to 100); the other parts off at once. The
        SDK also sends the arms to their default posture first (a GoTo), which rlctl does not."""
        arms = [p for p in parts if p in ("l_arm", "r_arm")]
        for part in [p for p in parts if p not in ("l_hand", "r_hand", *arms)]:
            self._part_call(part, "TurnOff", self.part_id(part))
        torque = 50
        for part in arms:
            self._limit(part, "SetTorqueLimit", torque)
            self._limit(part, "SetSpeedLimit", 25)
        for _ in range(SMOOTH_OFF_STEPS):
            time.sleep(SMOOTH_OFF_STEP_S)
            torque -= 15
            for part in arms:
                self._limit(part, "SetTorqueLimit", torque)
        for part in arms:
            self._part_call(part, "TurnOff", self.part_id(part))
            if self.robot.HasField(f"{part[0]}_hand"):
                self._part_call(f"{part[0]}_hand", "TurnOff", self.part_id(f"{part[0]}_hand"))
            self._limit(part, "SetTorqueLimit", 100)

    def _limit(self, part: str, method: str, value: int) -> None:
        module = self.api.arm if part in ("l_arm", "r_arm") else self.api.head
        request_type = module.SpeedLimitRequest if "Speed" in method else module.TorqueLimitRequest
        self._part_call(part, method, request_type(id=self.part_id(part), limit=value))

    def _stub(self, part: str) -> Any:
        api = self.api
        if part in ("l_arm", "r_arm"):
            return api.arm_grpc.ArmServiceStub(self.channel)
        if part in ("l_hand", "r_hand"):
            return api.hand_grpc.HandServiceStub(self.channel)
        if part == "head":
            return api.head_grpc.HeadServiceStub(self.channel)
        return api.base_grpc.MobileBaseUtilityServiceStub(self.channel)

    def _part_call(self, part: str, method: str, request: Any) -> Any:
        try:
            return self._call(getattr(self._stub(part), method), request)
        except self.api.grpc.RpcError as error:
            raise PartUnanswered.of(f"{PART_LABELS[part]} ({method})", error) from error

    def send_goals(self, joints: Sequence[Joint], degrees: Sequence[float]) -> None:
        """Goal positions of `joints`, in one `SendComponentsCommands` as the SDK sends them."""
        api = self.api
        goals: dict[tuple[str, str], dict[str, float]] = {}
        for (_, part, component, axis), value in zip(joints, degrees, strict=True):
            goals.setdefault((part, component), {})[axis or "value"] = math.radians(value)
        commands: dict[str, Any] = {}
        arm_commands: dict[str, dict[str, Any]] = {}
        head_commands: dict[str, Any] = {}
        for (part, component), axes in goals.items():
            if component == "gripper":
                commands[f"{part[0]}_hand_commands"] = api.hand.HandPositionRequest(
                    id=self.part_id(f"{part[0]}_hand"),
                    position=api.hand.HandPosition(
                        parallel_gripper=api.hand.ParallelGripperPosition(
                            position=_float(axes["value"])
                        )
                    ),
                )
            elif component in ("shoulder", "elbow"):
                first, second = self.axes[(part, component)]
                pose = api.orbita2d.Pose2d(
                    **{
                        key: _float(axes[name])
                        for key, name in (("axis_1", first), ("axis_2", second))
                        if name in axes
                    }
                )
                orbita = getattr(getattr(self.robot, part).description, component)
                arm_commands.setdefault(part, {})[f"{component}_command"] = (
                    api.orbita2d.Orbita2dsCommand(
                        cmd=[api.orbita2d.Orbita2dCommand(id=orbita.id, goal_position=pose)]
                    )
                )
            elif component in ("wrist", "neck"):
                rpy = api.kinematics.ExtEulerAngles(**{k: _float(v) for k, v in axes.items()})
                owner = getattr(self.robot, part).description
                orbita = getattr(owner, component)
                command = api.orbita3d.Orbita3dsCommand(
                    cmd=[
                        api.orbita3d.Orbita3dCommand(
                            id=orbita.id, goal_position=api.kinematics.Rotation3d(rpy=rpy)
                        )
                    ]
                )
                if part == "head":
                    head_commands["neck_command"] = command
                else:
                    arm_commands.setdefault(part, {})["wrist_command"] = command
            else:  # an antenna
                motor = getattr(self.robot.head.description, component)
                head_commands[f"{component}_command"] = api.dynamixel.DynamixelMotorsCommand(
                    cmd=[
                        api.dynamixel.DynamixelMotorCommand(
                            id=motor.id, goal_position=_float(axes["value"])
                        )
                    ]
                )
        for part, parts in arm_commands.items():
            commands[f"{part}_commands"] = api.arm.ArmComponentsCommands(**parts)
        if head_commands:
            commands["head_commands"] = api.head.HeadComponentsCommands(**head_commands)
        stub = api.reachy_grpc.ReachyServiceStub(self.channel)
        try:
            self._call(stub.SendComponentsCommands, api.reachy.ReachyComponentsCommands(**commands))
        except api.grpc.RpcError as error:
            raise PartUnanswered.of("joint commands (SendComponentsCommands)", error) from error

    def send_velocity(self, vx: float, vy: float, vtheta_deg: float) -> None:
        api = self.api
        request = api.mobility.TargetDirectionCommand(
            id=self.part_id("mobile_base"),
            direction=api.mobility.DirectionVector(
                x=_float(vx), y=_float(vy), theta=_float(math.radians(vtheta_deg))
            ),
        )
        stub = api.mobility_grpc.MobileBaseMobilityServiceStub(self.channel)
        try:
            self._call(stub.SendDirection, request)
        except api.grpc.RpcError as error:
            raise PartUnanswered.of(
                f"{PART_LABELS['mobile_base']} (SendDirection)", error
            ) from error


def _float(value: float) -> Any:
    from google.protobuf.wrappers_pb2 import FloatValue

    return FloatValue(value=float(value))


def _empty() -> Any:
    from google.protobuf.empty_pb2 import Empty

    return Empty()
