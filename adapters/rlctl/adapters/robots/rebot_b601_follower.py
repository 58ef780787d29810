"""`--robot.type=rebot_b601_follower`: Seeed's reBot B601-DM, six joints and a gripper on Damiao
motors on one CAN bus, as LeRobot 0.6.1's `RebotB601Follower` drives it (through `motorbridge`
there, through python-can here).

Features are LeRobot's: `shoulder_pan.pos` … `gripper.pos`, degrees from the motors' zero. The
joints are driven in MIT mode (or position-velocity with `control_mode=pos_vel`), the gripper in
force-position mode with a grip-force cap (or MIT); each motor is put in its mode at connect.
Every goal passes the robot port's `ActionGuard` first: finite, inside `joint_limits`, and with
`max_relative_target` at most that far from where each joint is.

The CAN bus is reached through socketcan (`can_adapter=socketcan`, `port=can0`), Damiao's USB-CAN
serial bridge (`can_adapter=damiao`, `port=/dev/ttyACM0`, LeRobot's default), or python-can's
in-process virtual bus (`can_adapter=virtual`, for the emulated arm).

Calibration is LeRobot's: in its zero pose (the sit-down position) with the gripper closed, every
motor is zeroed and given its joint limits as its range; the file is
`robots/rebot_b601_follower/<id>.json` in LeRobot's calibration folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlctl.adapters.cameras.config import build_cameras
from rlctl.adapters.robots.bimanual import (
    SIDES,
    BimanualFollower,
    require_bimanual_id,
    require_two_ports,
)
from rlctl.adapters.robots.config import BiRebotB601FollowerConfig, RebotB601FollowerConfig
from rlctl.adapters.robots.openarm_follower import DamiaoArm, OpenArmFollower
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import CalibrationPlan, CalibrationStore
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.errors import ConfigError
from rlctl.domain.motors import Motor

if TYPE_CHECKING:
    from rlctl.adapters.motors.damiao_modes import DamiaoModeBus, MotorMode

ROBOT_TYPE = "rebot_b601_follower"
ZERO_POSE = "in its zero pose (the sit-down position of the B601 manual), gripper closed,"
GRIPPER = "gripper"
# LeRobot's motor models (motorbridge's names), and the Damiao table's name for each: a 4340P
# has a 4340's frame scales.
MOTOR_MODELS = {
    "shoulder_pan": "dm4340",
    "shoulder_lift": "dm4340",
    "elbow_flex": "dm4340",
    "wrist_flex": "dm4310",
    "wrist_yaw": "dm4310",
    "wrist_roll": "dm4310",
    "gripper": "dm4310",
}
CAN_ADAPTERS = {"damiao": "damiao_serial", "socketcan": "socketcan", "virtual": "virtual"}


class RebotB601Arm(DamiaoArm):
    """The B601's motors: `DamiaoArm` with each motor put in its control mode, and LeRobot's
    calibration (zero pose, joint limits as ranges)."""

    def __init__(self, *args: Any, ranges: Mapping[str, tuple[int, int]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ranges = dict(ranges)

    @property
    def bus(self) -> DamiaoModeBus:
        return self._bus  # type: ignore[return-value]

    @property
    def calibration_plan(self) -> CalibrationPlan:
        return CalibrationPlan(
            zero_pose=ZERO_POSE, fixed_ranges=self._ranges, ids_set_by="Damiao's debugging tool"
        )

    def _configure(self) -> None:
        self._bus.sync_write("Kp", {m: kp for m, (kp, _) in self._gains.items()})
        self._bus.sync_write("Kd", {m: kd for m, (_, kd) in self._gains.items()})
        self.bus.configure_motors()  # the modes set, then every motor enabled


class RebotB601Follower(OpenArmFollower):
    @property
    def robot_type(self) -> str:
        return ROBOT_TYPE


def _per_motor(value: float | list[float], names: list[str], field: str) -> dict[str, float]:
    if isinstance(value, int | float):
        return dict.fromkeys(names, float(value))
    if len(value) != len(names):
        raise ConfigError(
            f"{field} has {len(value)} values for {len(names)} motors",
            where=f"robot.{field}",
            hint=f"give one number, or one per motor in motor_can_ids' order: {', '.join(names)}",
        )
    return {name: float(v) for name, v in zip(names, value, strict=True)}


def check_config(config: RebotB601FollowerConfig) -> None:
    """Refuse what LeRobot would fail on later (or not at all)."""
    checks = (
        ("can_adapter", config.can_adapter, tuple(CAN_ADAPTERS)),
        ("control_mode", config.control_mode, ("mit", "pos_vel")),
        ("gripper_control_mode", config.gripper_control_mode, ("force_pos", "mit")),
    )
    for field, value, allowed in checks:
        if value not in allowed:
            raise ConfigError(
                f"{field} is {value!r}",
                where=f"robot.{field}",
                hint=f"one of: {', '.join(allowed)}"
                + (
                    " (socketcan for any SocketCAN adapter: PCAN, slcan via slcand, …)"
                    if field == "can_adapter"
                    else ""
                ),
            )
    names = list(config.motor_can_ids)
    unknown = [n for n in names if n not in MOTOR_MODELS]
    if unknown:
        raise ConfigError(
            f"motor_can_ids names motors the B601 does not have: {', '.join(unknown)}",
            where="robot.motor_can_ids",
            hint=f"the B601's motors: {', '.join(MOTOR_MODELS)}",
        )
    missing = [n for n in names if n not in config.joint_limits]
    if missing:
        raise ConfigError(
            f"joint_limits has no range for {', '.join(missing)}",
            where="robot.joint_limits",
            hint="give every motor a (min, max) in degrees",
        )
    if not 0 <= config.gripper_torque_ratio <= 1:
        raise ConfigError(
            f"gripper_torque_ratio is {config.gripper_torque_ratio}",
            where="robot.gripper_torque_ratio",
            hint="a share of the gripper motor's maximum force, 0..1 (LeRobot's default: 0.07)",
        )


def rebot_modes(config: RebotB601FollowerConfig) -> dict[str, MotorMode]:
    from rlctl.adapters.motors.damiao_modes import MotorMode

    names = list(config.motor_can_ids)
    velocity = _per_motor(config.pos_vel_velocity, names, "pos_vel_velocity")
    modes = {}
    for name in names:
        mode = config.gripper_control_mode if name == GRIPPER else config.control_mode
        ratio = config.gripper_torque_ratio if mode == "force_pos" else 1.0
        modes[name] = MotorMode(mode, velocity[name], ratio)
    return modes


def rebot_gains(config: RebotB601FollowerConfig) -> dict[str, tuple[float, float]]:
    names = list(config.motor_can_ids)
    kp = _per_motor(config.mit_kp, names, "mit_kp")
    kd = _per_motor(config.mit_kd, names, "mit_kd")
    if GRIPPER in names and config.gripper_control_mode == "mit":
        kp[GRIPPER], kd[GRIPPER] = config.gripper_mit_kp, config.gripper_mit_kd
    return {name: (kp[name], kd[name]) for name in names}


def rebot_bus(config: RebotB601FollowerConfig) -> DamiaoModeBus:
    """The arm's CAN bus as its config describes it (python-can loads here)."""
    from rlctl.adapters.motors.damiao_modes import DamiaoModeBus

    check_config(config)
    motors = {
        name: Motor(send_id, MOTOR_MODELS[name], MotorNormMode.DEGREES)
        for name, (send_id, _recv) in config.motor_can_ids.items()
    }
    recv_ids = {name: recv for name, (_send, recv) in config.motor_can_ids.items()}
    return DamiaoModeBus(
        config.port,
        motors,
        modes=rebot_modes(config),
        serial_baudrate=config.dm_serial_baud,
        interface=CAN_ADAPTERS[config.can_adapter],
        use_can_fd=False,
        bitrate=1_000_000,
        data_bitrate=None,
        recv_ids=recv_ids,
        timeout_s=config.can_timeout_s,
        retries=config.can_retries,
    )


def rebot_b601_follower(
    config: RebotB601FollowerConfig,
    *,
    calibration_store: CalibrationStore,
    bus: DamiaoModeBus | None = None,
    cameras: Mapping[str, Camera] | None = None,
) -> RebotB601Follower:
    bus = bus or rebot_bus(config)
    ranges = {
        name: (int(low), int(high))
        for name, (low, high) in config.joint_limits.items()
        if name in config.motor_can_ids
    }
    arm = RebotB601Arm(
        bus,
        config.calibration_key(ROBOT_TYPE),
        calibration_store,
        rebot_gains(config),
        ranges=ranges,
    )
    sizes = {name: camera.frame_size(name) for name, camera in config.cameras.items()}
    limits = {n: r for n, r in config.joint_limits.items() if n in config.motor_can_ids}
    return RebotB601Follower(
        arm,
        cameras if cameras is not None else build_cameras(config.cameras),
        sizes,
        joint_limits=limits,
        max_relative_target=config.max_relative_target,
        disable_torque_on_disconnect=config.disable_torque_on_disconnect,
    )


def bi_rebot_b601_follower(
    config: BiRebotB601FollowerConfig,
    *,
    calibration_store: CalibrationStore,
    cameras: Mapping[str, Camera] | None = None,
) -> BimanualFollower:
    """Two B601s (LeRobot's `bi_rebot_b601_follower`), each on its own CAN bus."""
    require_bimanual_id(config.id, "robot")
    require_two_ports(config.left_arm_config.port, config.right_arm_config.port, "robot")
    sizes = {name: camera.frame_size(name) for name, camera in config.cameras.items()}
    arms = {
        side: rebot_b601_follower(config.arm(side), calibration_store=calibration_store)
        for side in SIDES
    }
    return BimanualFollower(
        arms["left"],
        arms["right"],
        cameras if cameras is not None else build_cameras(config.cameras),
        sizes,
        robot_type="bi_rebot_b601_follower",
    )
