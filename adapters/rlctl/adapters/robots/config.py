"""Robot configs: a tagged union on `type`, each member naming the adapter that builds it.

    --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=black \\
        --robot.cameras='{front: {type: opencv, index_or_path: 0, width: 640, height: 480}}'

Fields and defaults are LeRobot 0.6.1's, so its command lines and config files work unchanged.
Importing this module is cheap: the SDKs, OpenCV and simulators load when a robot is built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

# The registry module hooks env structuring, so `--robot.env.type=pusht` finds every env type.
import rlctl.adapters.sim.registry  # noqa: F401
from rlctl.adapters.cameras.config import CameraConfig
from rlctl.adapters.robots.device_config import DeviceConfig
from rlctl.adapters.sim.config import EnvConfig
from rlctl.domain.config import Register, converter, tagged_union
from rlctl.domain.errors import ConfigError
from rlctl.domain.network_address import check_host, check_port
from rlctl.domain.plugins import PluginKind

if TYPE_CHECKING:
    from rlctl.application.ports.robot import CalibrationStore, Robot

# A cap on how far a joint moves in one step: one number for all, or one per motor.
MaxRelativeTarget = float | dict[str, float] | None


@tagged_union
@attrs.frozen(kw_only=True)
class RobotConfig(DeviceConfig):
    calibration_kind: ClassVar[Literal["robots", "teleoperators"]] = "robots"
    register: ClassVar[Register]

    def build(self, calibration_store: CalibrationStore) -> Robot:
        return self._make(calibration_store)

    def without_cameras(self) -> RobotConfig:
        """The same robot with no cameras (calibration and motor setup need none)."""
        if not hasattr(self, "cameras"):
            return self
        # The type checker knows this class's fields only; `cameras` is a subclass's.
        return attrs.evolve(self, cameras={})  # type: ignore[call-arg]


@attrs.frozen(kw_only=True)
class ArmFollowerConfig(RobotConfig):
    """What LeRobot's follower arms share: the motor bus's port, cameras, and safety settings."""

    port: str
    disable_torque_on_disconnect: bool = True
    max_relative_target: MaxRelativeTarget = None
    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SOFollowerConfig(ArmFollowerConfig):
    adapter: ClassVar[str] = "rlctl.adapters.robots.so_follower:so_follower"

    # Joints in degrees (LeRobot 0.6.1's default) or in -100..100 of their range.
    use_degrees: bool = True
    position_p_coefficient: int = 16
    position_i_coefficient: int = 0
    position_d_coefficient: int = 32
    num_read_retries: int = 2


@RobotConfig.register("so101_follower")
@attrs.frozen(kw_only=True)
class SO101FollowerConfig(SOFollowerConfig):
    pass


@RobotConfig.register("so100_follower")
@attrs.frozen(kw_only=True)
class SO100FollowerConfig(SOFollowerConfig):
    pass


@attrs.frozen(kw_only=True)
class SOFollowerArmConfig:
    """One arm of a bimanual SO robot: LeRobot 0.6.1's `SOFollowerConfig` (no id, no type; the
    robot's id names both arms' calibration files)."""

    # The arm's motors board (`rlctl find-port`).
    port: str
    disable_torque_on_disconnect: bool = True
    # Caps each joint's step: one number for all, or one per motor.
    max_relative_target: MaxRelativeTarget = None
    # The arm's own cameras, named `<side>_<name>` in the dataset.
    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)
    # Joints in degrees (LeRobot 0.6.1's default) or in -100..100 of their range.
    use_degrees: bool = True
    position_p_coefficient: int = 16
    position_i_coefficient: int = 0
    position_d_coefficient: int = 32
    num_read_retries: int = 2


@attrs.frozen(kw_only=True)
class BimanualFollowerConfig(RobotConfig):
    """Two follower arms as one robot, as LeRobot's bimanual robots are: features `left_*` and
    `right_*`, each arm calibrated in its own file, `<id>_left.json` and `<id>_right.json`,
    under the single arm's type. `cameras` are the robot's own (not on an arm): their names are
    kept as they are; an arm's cameras are named `left_<name>` / `right_<name>`."""

    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)

    def without_cameras(self) -> RobotConfig:
        arms = {
            side: attrs.evolve(getattr(self, side), cameras={})
            for side in ("left_arm_config", "right_arm_config")
        }
        return attrs.evolve(self, cameras={}, **arms)  # type: ignore[arg-type]


@RobotConfig.register("bi_so_follower")
@attrs.frozen(kw_only=True)
class BiSOFollowerConfig(BimanualFollowerConfig):
    adapter: ClassVar[str] = "rlctl.adapters.robots.bi_so_follower:bi_so_follower"

    # The left arm: an SO follower's settings, less its id (`<id>_left`) and type.
    left_arm_config: SOFollowerArmConfig
    # The right arm, likewise (`<id>_right`).
    right_arm_config: SOFollowerArmConfig

    def arm(self, side: Literal["left", "right"]) -> SOFollowerConfig:
        """The single SO follower LeRobot makes of one side: id `<id>_<side>`."""
        arm: SOFollowerArmConfig = getattr(self, f"{side}_arm_config")
        return SO101FollowerConfig(
            id=f"{self.id}_{side}" if self.id else None,
            calibration_dir=self.calibration_dir,
            **attrs.asdict(arm, recurse=False),
        )


@RobotConfig.register("koch_follower")
@attrs.frozen(kw_only=True)
class KochFollowerConfig(ArmFollowerConfig):
    adapter: ClassVar[str] = "rlctl.adapters.robots.koch_follower:koch_follower"

    use_degrees: bool = False
    num_read_retries: int = 2


@RobotConfig.register("omx_follower")
@attrs.frozen(kw_only=True)
class OmxFollowerConfig(ArmFollowerConfig):
    """ROBOTIS's OpenMANIPULATOR-X (OMX) follower: six Dynamixel servos, ids 11 to 16,
    calibrated at the factory (LeRobot 0.6.1's `omx_follower`)."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.omx_follower:omx_follower"

    # Joints in -100..100 of their range (LeRobot's default), or in degrees.
    use_degrees: bool = False


@RobotConfig.register("hope_jr_arm")
@attrs.frozen(kw_only=True)
class HopeJrArmConfig(ArmFollowerConfig):
    """Hugging Face's Hope JR arm (LeRobot 0.6.1's `hope_jr_arm`): a Feetech SM8512BL shoulder
    pitch (id 1) and six STS3250 servos (ids 2-7), joints in -100..100 of their range."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.hope_jr:hope_jr_arm"

    # rlctl's: extra attempts of a read the motors did not answer.
    num_read_retries: int = 2


def _check_hand_side(_: Any, __: attrs.Attribute[str], value: str) -> None:
    if value not in ("left", "right"):
        raise ConfigError(
            f"side must be left or right, got {value!r}",
            where="robot.side",
            hint="which hand it is: it picks the motors LeRobot drives in reverse",
        )


@RobotConfig.register("hope_jr_hand")
@attrs.frozen(kw_only=True)
class HopeJrHandConfig(ArmFollowerConfig):
    """Hugging Face's Hope JR hand (LeRobot 0.6.1's `hope_jr_hand`): 16 Feetech SCS0009 servos
    (ids 1-16, Feetech's protocol 1) pulling its fingers' tendons, in 0..100 of their range."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.hope_jr:hope_jr_hand"

    # left / right: which hand it is.
    side: str = attrs.field(validator=_check_hand_side)
    # rlctl's: extra attempts of a read the motors did not answer.
    num_read_retries: int = 2


# LeRobot 0.6.1's OpenArm joint limits (degrees), per side; without a side, small ones for safety.
OPENARM_LEFT_LIMITS: dict[str, tuple[float, float]] = {
    "joint_1": (-75.0, 75.0),
    "joint_2": (-90.0, 9.0),
    "joint_3": (-85.0, 85.0),
    "joint_4": (0.0, 135.0),
    "joint_5": (-85.0, 85.0),
    "joint_6": (-40.0, 40.0),
    "joint_7": (-80.0, 80.0),
    "gripper": (-65.0, 0.0),
}
OPENARM_RIGHT_LIMITS: dict[str, tuple[float, float]] = {
    **OPENARM_LEFT_LIMITS,
    "joint_2": (-9.0, 90.0),
}


def openarm_motor_config() -> dict[str, tuple[int, int, str]]:
    """LeRobot's OpenArm motor table: name -> (send id, receive id, model)."""
    models = ("dm8009", "dm8009", "dm4340", "dm4340", "dm4310", "dm4310", "dm4310", "dm4310")
    names = [f"joint_{i}" for i in range(1, 8)] + ["gripper"]
    return {name: (i, i + 0x10, model) for i, (name, model) in enumerate(zip(names, models), 1)}


def _small_limits() -> dict[str, tuple[float, float]]:
    limits = dict.fromkeys(openarm_motor_config(), (-5.0, 5.0))
    return {**limits, "joint_4": (0.0, 5.0), "gripper": (-5.0, 0.0)}


def _check_side(_: Any, __: attrs.Attribute[str | None], value: str | None) -> None:
    if value not in (None, "left", "right"):
        raise ConfigError(
            f"side must be left, right or unset, got {value!r}",
            where="robot.side",
            hint="`left` and `right` pick LeRobot's joint limits for that arm; unset, "
            "`joint_limits` applies",
        )


def _check_joint_limits(limits: dict[str, tuple[float, float]]) -> None:
    # An infinite bound would leave the guard open on that side (the MIT frame then saturates
    # any goal at the motor's scale end).
    for name, bounds in limits.items():
        try:
            low, high = (float(b) for b in bounds)
        except (TypeError, ValueError):
            low = high = math.nan
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ConfigError(
                f"the limits of {name!r} must be two finite degrees, the lower first, "
                f"got {bounds!r}",
                where=f"robot.joint_limits.{name}",
                hint="e.g. --robot.joint_limits='{joint_1: [-75, 75]}'",
            )


def _positive_finite(_: Any, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ConfigError(
            f"{attribute.name} must be a positive finite number, got {value!r}",
            where=f"robot.{attribute.name}",
            hint="the fastest the safety guard lets the base go",
        )


# Not slotted: the robot config below inherits it beside RobotConfig (one slotted base only).
@attrs.frozen(kw_only=True, slots=False)
class OpenArmFollowerArmConfig:
    """One OpenArm's settings (LeRobot 0.6.1's `OpenArmFollowerConfigBase`): seven joints and a
    gripper, Damiao motors on one CAN bus in MIT mode."""

    # The arm's CAN interface (`can0`; a /dev path with can_interface=slcan).
    port: str
    # `left` or `right`: LeRobot's joint limits for that arm (they replace `joint_limits`).
    side: str | None = attrs.field(default=None, validator=_check_side)
    # python-can's interface: socketcan (Linux), slcan (serial adapters), virtual, or auto.
    can_interface: str = "socketcan"
    use_can_fd: bool = True
    can_bitrate: int = 1_000_000
    can_data_bitrate: int = 5_000_000
    disable_torque_on_disconnect: bool = True
    # Also record each motor's velocity (`.vel`) and torque (`.torque`) in the state.
    use_velocity_and_torque: bool = False
    max_relative_target: MaxRelativeTarget = None
    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)
    # Motor name -> (send id, receive id, model).
    motor_config: dict[str, tuple[int, int, str]] = attrs.field(factory=openarm_motor_config)
    # MIT gains, one per motor in motor_config's order.
    position_kp: list[float] = attrs.field(
        factory=lambda: [240.0, 240.0, 240.0, 240.0, 24.0, 31.0, 25.0, 25.0]
    )
    position_kd: list[float] = attrs.field(factory=lambda: [5.0, 5.0, 3.0, 5.0, 0.3, 0.3, 0.3, 0.3])
    # Degrees each joint may be sent (the safety guard's range), used when `side` is unset.
    joint_limits: dict[str, tuple[float, float]] = attrs.field(
        factory=_small_limits, validator=lambda _, __, value: _check_joint_limits(value)
    )
    # rlctl's: how long the motors' answers to one exchange may take, and extra attempts.
    can_timeout_s: float = 0.01
    can_retries: int = 2

    def effective_joint_limits(self) -> dict[str, tuple[float, float]]:
        """LeRobot's rule: a side's limits replace the configured ones."""
        if self.side == "left":
            return dict(OPENARM_LEFT_LIMITS)
        if self.side == "right":
            return dict(OPENARM_RIGHT_LIMITS)
        return dict(self.joint_limits)


@RobotConfig.register("openarm_follower")
@attrs.frozen(kw_only=True)
class OpenArmFollowerConfig(RobotConfig, OpenArmFollowerArmConfig):
    """An OpenArm as a robot: its settings, an id and a calibration folder."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.openarm_follower:openarm_follower"


@RobotConfig.register("bi_openarm_follower")
@attrs.frozen(kw_only=True)
class BiOpenArmFollowerConfig(BimanualFollowerConfig):
    """Two OpenArms as one robot (LeRobot's `bi_openarm_follower`): features `left_*` then
    `right_*`, each arm calibrated as `openarm_follower` `<id>_left` / `<id>_right`."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.bi_openarm_follower:bi_openarm_follower"

    # LeRobot's default id: the arms' files are bi_openarm_follower_left.json and _right.json.
    id: str | None = "bi_openarm_follower"
    # The left arm: an OpenArm's settings, less its id (`<id>_left`) and type.
    left_arm_config: OpenArmFollowerArmConfig
    # The right arm, likewise (`<id>_right`).
    right_arm_config: OpenArmFollowerArmConfig

    def arm(self, side: Literal["left", "right"]) -> OpenArmFollowerConfig:
        arm: OpenArmFollowerArmConfig = getattr(self, f"{side}_arm_config")
        return OpenArmFollowerConfig(
            id=f"{self.id}_{side}" if self.id else None,
            calibration_dir=self.calibration_dir,
            **attrs.asdict(arm, recurse=False),
        )


# The Seeed reBot B601-DM (LeRobot 0.6.1's `rebot_b601_follower`): six joints and a gripper on
# Damiao motors, send id n answered on 0x10 + n.
REBOT_B601_JOINTS = (
    "shoulder_pan",
    "shoulder_lift",
    "elbow_flex",
    "wrist_flex",
    "wrist_yaw",
    "wrist_roll",
    "gripper",
)
REBOT_B601_LIMITS: dict[str, tuple[float, float]] = {
    "shoulder_pan": (-150.0, 150.0),
    "shoulder_lift": (-200.0, 1.0),
    "elbow_flex": (-200.0, 1.0),
    "wrist_flex": (-80.0, 90.0),
    "wrist_yaw": (-90.0, 90.0),
    "wrist_roll": (-90.0, 90.0),
    "gripper": (-270.0, 0.0),
}


# A number for every motor, or one per motor (LeRobot's `float | list[float]` gains).
NumberOrList = float | list[float]


def _structure_number_or_list(data: Any, _: type) -> float | list[float]:
    if isinstance(data, str):
        data = data.strip()
        data = [p for p in data.strip("[]").split(",") if p.strip()] if "," in data else data
    if isinstance(data, list | tuple):
        return [converter.structure(v, float) for v in data]
    return converter.structure(data, float)


converter.register_structure_hook_func(lambda t: t == NumberOrList, _structure_number_or_list)


def _rebot_can_ids() -> dict[str, tuple[int, int]]:
    return {name: (i, 0x10 + i) for i, name in enumerate(REBOT_B601_JOINTS, 1)}


# Not slotted: the robot config below inherits it beside RobotConfig (one slotted base only).
@attrs.frozen(kw_only=True, slots=False)
class RebotB601FollowerArmConfig:
    """One reBot B601-DM's settings (LeRobot 0.6.1's `RebotB601FollowerConfig`)."""

    # The CAN channel (`can0`) with can_adapter=socketcan, or the Damiao USB-CAN bridge's serial
    # device (`/dev/ttyACM0`) with can_adapter=damiao.
    port: str
    # damiao (Damiao's USB-CAN serial bridge), socketcan, or rlctl's virtual (python-can's
    # in-process bus, for the emulated arm).
    can_adapter: str = "damiao"
    # The Damiao bridge's serial baud rate.
    dm_serial_baud: int = 921600
    disable_torque_on_disconnect: bool = True
    max_relative_target: MaxRelativeTarget = None
    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)
    # Motor name -> (send CAN id, receive CAN id).
    motor_can_ids: dict[str, tuple[int, int]] = attrs.field(factory=_rebot_can_ids)
    # Velocity limit (deg/s) per motor for pos_vel joints and the force_pos gripper: one for
    # all, or one per motor in motor_can_ids' order.
    pos_vel_velocity: NumberOrList = attrs.field(
        factory=lambda: [150.0, 150.0, 150.0, 150.0, 150.0, 150.0, 900.0]
    )
    # The arm's joints: mit or pos_vel.
    control_mode: str = "mit"
    # MIT gains: one for all, or one per motor in motor_can_ids' order.
    mit_kp: NumberOrList = attrs.field(factory=lambda: [45.0, 45.0, 45.0, 8.0, 9.0, 8.0, 8.0])
    mit_kd: NumberOrList = attrs.field(factory=lambda: [12.0, 12.0, 12.0, 1.0, 1.0, 1.0, 1.0])
    # The gripper: force_pos (position with a grip-force cap) or mit.
    gripper_control_mode: str = "force_pos"
    # force_pos only: the grip-force cap, 0..1 of the motor's maximum.
    gripper_torque_ratio: float = 0.07
    gripper_mit_kp: float = 8.0
    gripper_mit_kd: float = 0.3
    # Degrees each joint may be sent (the safety guard's range) and its calibrated range.
    joint_limits: dict[str, tuple[float, float]] = attrs.field(
        factory=lambda: dict(REBOT_B601_LIMITS)
    )
    # rlctl's: how long the motors' answers to one exchange may take, and extra attempts.
    can_timeout_s: float = 0.01
    can_retries: int = 2


@RobotConfig.register("rebot_b601_follower")
@attrs.frozen(kw_only=True)
class RebotB601FollowerConfig(RobotConfig, RebotB601FollowerArmConfig):
    """A Seeed reBot B601-DM arm as a robot: its settings, an id and a calibration folder."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.rebot_b601_follower:rebot_b601_follower"


@RobotConfig.register("bi_rebot_b601_follower")
@attrs.frozen(kw_only=True)
class BiRebotB601FollowerConfig(BimanualFollowerConfig):
    """Two reBot B601-DM arms as one robot (LeRobot's `bi_rebot_b601_follower`): features
    `left_*` then `right_*`, each arm calibrated as `rebot_b601_follower` `<id>_left` /
    `<id>_right`."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.rebot_b601_follower:bi_rebot_b601_follower"

    # The left arm: a B601's settings, less its id (`<id>_left`) and type.
    left_arm_config: RebotB601FollowerArmConfig
    # The right arm, likewise (`<id>_right`).
    right_arm_config: RebotB601FollowerArmConfig

    def arm(self, side: Literal["left", "right"]) -> RebotB601FollowerConfig:
        arm: RebotB601FollowerArmConfig = getattr(self, f"{side}_arm_config")
        return RebotB601FollowerConfig(
            id=f"{self.id}_{side}" if self.id else None,
            calibration_dir=self.calibration_dir,
            **attrs.asdict(arm, recurse=False),
        )


def lekiwi_cameras() -> dict[str, CameraConfig]:
    """LeRobot 0.6.1's LeKiwi cameras: the front one upside down, the wrist one on its side."""
    from rlctl.adapters.cameras.config import OpenCVCameraConfig

    return {
        "front": OpenCVCameraConfig(
            index_or_path="/dev/video0", fps=30, width=640, height=480, fourcc="MJPG", rotation=180
        ),
        "wrist": OpenCVCameraConfig(
            index_or_path="/dev/video2", fps=30, width=480, height=640, fourcc="MJPG", rotation=90
        ),
    }


@attrs.frozen(kw_only=True, slots=False)
class LeKiwiBaseLimits:
    """rlctl's: the base velocities the safety guard lets through. Past them by more than a tenth
    an action is refused and the base stopped; a little past, clipped. (LeRobot's keyboard
    speeds reach 0.3 m/s and 90 deg/s; the wheels are scaled down past 3000 ticks/s anyway.)"""

    # The fastest x.vel / y.vel the guard lets through (m/s).
    base_max_linear_m_s: float = attrs.field(default=1.0, validator=_positive_finite)
    # The fastest theta.vel the guard lets through (deg/s).
    base_max_angular_deg_s: float = attrs.field(default=360.0, validator=_positive_finite)


@RobotConfig.register("lekiwi")
@attrs.frozen(kw_only=True)
class LeKiwiConfig(RobotConfig, LeKiwiBaseLimits):
    """LeKiwi driven on its own computer (what `rlctl lekiwi-host` runs): a SO arm and three
    omniwheels, nine Feetech STS3215 on one bus, LeRobot 0.6.1's settings."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.lekiwi:lekiwi"

    # The motors board (`rlctl find-port`).
    port: str = "/dev/ttyACM0"
    disable_torque_on_disconnect: bool = True
    # Caps each arm joint's step (the wheels take velocities): one number, or one per motor.
    max_relative_target: MaxRelativeTarget = None
    cameras: dict[str, CameraConfig] = attrs.field(factory=lekiwi_cameras)
    # Arm joints in degrees (LeRobot 0.6.1's default) or in -100..100 of their range.
    use_degrees: bool = True
    # Extra attempts when a read of the motors fails.
    num_read_retries: int = 2


def lekiwi_teleop_keys() -> dict[str, str]:
    return {
        "forward": "w",
        "backward": "s",
        "left": "a",
        "right": "d",
        "rotate_left": "z",
        "rotate_right": "x",
        "speed_up": "r",
        "speed_down": "f",
        "quit": "q",
    }


@RobotConfig.register("lekiwi_client")
@attrs.frozen(kw_only=True)
class LeKiwiClientConfig(RobotConfig, LeKiwiBaseLimits):
    """LeKiwi seen from a laptop: observations and actions over ZeroMQ to the host running on
    the robot (`rlctl lekiwi-host`, or LeRobot's `lerobot.robots.lekiwi.lekiwi_host`)."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.lekiwi_client:lekiwi_client"

    # The robot's address.
    remote_ip: str
    port_zmq_cmd: int = 5555
    port_zmq_observations: int = 5556
    # Keys that drive the base (LeRobot's bindings), for keyboard teleoperation.
    teleop_keys: dict[str, str] = attrs.field(factory=lekiwi_teleop_keys)
    # The host's cameras, as it sends them (their sizes declare the dataset's features).
    cameras: dict[str, CameraConfig] = attrs.field(factory=lekiwi_cameras)
    # How long one observation read waits for a new message from the host.
    polling_timeout_ms: int = 15
    # How long connecting waits for the host's first observation.
    connect_timeout_s: float = 5
    # rlctl's: no observation from the host for this long is a lost robot (LeRobot keeps
    # serving the last one).
    observation_timeout_s: float = 2.0

    def __attrs_post_init__(self) -> None:
        check_host(
            self.remote_ip, where="robot.remote_ip", what="the robot's address",
            example="192.168.1.42 (the LeKiwi's IP address, as its host prints it)",
            port_setting="robot.port_zmq_cmd and robot.port_zmq_observations",
        )  # fmt: skip
        for field in ("port_zmq_cmd", "port_zmq_observations"):
            check_port(getattr(self, field), where=f"robot.{field}")


@RobotConfig.register("earthrover_mini_plus")
@attrs.frozen(kw_only=True)
class EarthRoverMiniPlusConfig(RobotConfig):
    """FrodoBots' EarthRover Mini Plus, as LeRobot 0.6.1's `earthrover_mini_plus`: driven over
    HTTP through the vendor's SDK server running beside rlctl (`hypercorn main:app`), which
    relays to the rover. Actions are `linear_velocity` and `angular_velocity` in the SDK's
    -1..1; the front and rear cameras come as 640x480 pictures, the telemetry as 22 floats."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.earthrover:earthrover_mini_plus"

    # The SDK server (LeRobot's default; LeRobot 0.6.1 ignores the setting, rlctl uses it).
    sdk_url: str = "http://localhost:8000"
    # rlctl's: the fastest linear / angular command the guard lets through (SDK units, 0..1].
    # Past them by more than a tenth of the range an action is refused and the rover stopped.
    max_linear_velocity: float = 1.0
    max_angular_velocity: float = 1.0
    # rlctl's: how long one request to the SDK may take (a frame, the telemetry, a command).
    request_timeout_s: float = 1.0
    # How long connecting waits for the SDK's first telemetry and both cameras' first frames.
    connect_timeout_s: float = 10.0
    # rlctl's: no good reading of a camera or the telemetry for this long is a lost robot (one
    # error naming it); LeRobot serves the last one forever.
    observation_timeout_s: float = 2.0
    # rlctl's: no new command for this long stops the rover (zero velocity), so a stalled
    # loop never leaves it driving; 0 turns the watchdog off.
    command_timeout_s: float = 0.5

    def __attrs_post_init__(self) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(self.sdk_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"sdk_url must be an http:// address, got {self.sdk_url!r}",
                where="robot.sdk_url",
                hint="the address the FrodoBots SDK server listens on, e.g. http://localhost:8000",
            )
        for field in ("max_linear_velocity", "max_angular_velocity"):
            value = getattr(self, field)
            if not 0 < value <= 1:
                raise ConfigError(
                    f"{field} must be in (0, 1] (the SDK's commands are -1..1), got {value!r}",
                    where=f"robot.{field}",
                )
        for field in ("request_timeout_s", "connect_timeout_s", "observation_timeout_s"):
            value = getattr(self, field)
            if not 0 < value < float("inf"):
                raise ConfigError(
                    f"{field} must be a positive number of seconds, got {value!r}",
                    where=f"robot.{field}",
                )
        if not 0 <= self.command_timeout_s < float("inf"):
            raise ConfigError(
                f"command_timeout_s must be >= 0 seconds, got {self.command_timeout_s!r}",
                where="robot.command_timeout_s",
                hint="0 turns the stop-on-silence watchdog off",
            )


@RobotConfig.register("reachy2")
@attrs.frozen(kw_only=True)
class Reachy2RobotConfig(RobotConfig):
    """Pollen Robotics' Reachy 2, as LeRobot 0.6.1's `reachy2`: joints in degrees (the grippers
    too) and the mobile base's `vx`, `vy` (m/s) and `vtheta` (deg/s), spoken over gRPC to the
    robot's SDK server (`sdk_port`) and video server (`port`). LeRobot's fields and defaults;
    the `with_*_camera` flags add `teleop_left`, `teleop_right` and `torso_rgb`."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.reachy2:reachy2"

    # The most a joint moves in one step from its present position (degrees); none: no cap.
    max_relative_target: float | None = None
    # The robot's address on the network.
    ip_address: str | None = "localhost"
    # The video server's port (LeRobot's `port`).
    port: int = 50065
    # Turn the motors off when the command ends (the arms' torque lowered over 3 s first).
    disable_torque_on_disconnect: bool = False
    # Another program commands the robot (Pollen's VR app): actions are recorded, never sent.
    use_external_commands: bool = False
    # The parts in use (their joints are the features); false leaves a part out.
    with_mobile_base: bool = True
    with_l_arm: bool = True
    with_r_arm: bool = True
    with_neck: bool = True
    with_antennas: bool = True
    # The robot's own cameras, as `teleop_left`, `teleop_right` and `torso_rgb`.
    with_left_teleop_camera: bool = False
    with_right_teleop_camera: bool = False
    with_torso_camera: bool = False
    # The size of the robot's own cameras' frames.
    camera_width: int = 640
    camera_height: int = 480
    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)
    # rlctl's: the SDK server's port (reachy2_sdk's `sdk_port`, which LeRobot leaves at 50051).
    sdk_port: int = 50051
    # rlctl's: how long one request may take.
    request_timeout_s: float = 1.0
    # rlctl's: how long connecting waits for the SDK server.
    connect_timeout_s: float = 5.0
    # rlctl's: no good reading (or no command taken) for this long is one error naming the part.
    observation_timeout_s: float = 2.0
    # rlctl's: the guard's range for every joint, +-degrees.
    max_joint_deg: float = 180.0
    # rlctl's: the guard's caps for the base, m/s and deg/s (the SDK's own).
    max_xy_velocity: float = 0.61
    max_rotation_velocity: float = 114.0

    def __attrs_post_init__(self) -> None:
        parts = ("with_mobile_base", "with_l_arm", "with_r_arm", "with_neck", "with_antennas")
        if not any(getattr(self, part) for part in parts):
            raise ConfigError(
                "no Reachy 2 part is used",
                where="robot.with_*",
                hint="set at least one of " + ", ".join(parts) + " to true",
            )
        check_host(
            self.ip_address or "", where="robot.ip_address", what="the robot",
            example="192.168.1.42", port_setting="robot.sdk_port (robot.port: the video's)",
        )  # fmt: skip
        for field in ("port", "sdk_port"):
            check_port(getattr(self, field), where=f"robot.{field}")
        positive = (
            "request_timeout_s",
            "connect_timeout_s",
            "observation_timeout_s",
            "max_joint_deg",
            "max_xy_velocity",
            "max_rotation_velocity",
        )
        for field in positive:
            value = getattr(self, field)
            if not 0 < value < float("inf"):
                raise ConfigError(
                    f"{field} must be a positive number, got {value!r}", where=f"robot.{field}"
                )
        if self.max_relative_target is not None and not 0 < self.max_relative_target < float("inf"):
            raise ConfigError(
                f"max_relative_target must be a positive number of degrees, got "
                f"{self.max_relative_target!r}",
                where="robot.max_relative_target",
            )

    def all_cameras(self) -> dict[str, CameraConfig]:
        """`cameras` and the robot's own the `with_*_camera` flags ask for (LeRobot's names)."""
        from rlctl.adapters.cameras.config import Reachy2CameraConfig

        own = {
            "teleop_left": ("teleop", "left", self.with_left_teleop_camera),
            "teleop_right": ("teleop", "right", self.with_right_teleop_camera),
            "torso_rgb": ("depth", "rgb", self.with_torso_camera),
        }
        cameras = dict(self.cameras)
        for key, (name, image_type, wanted) in own.items():
            if wanted:
                cameras[key] = Reachy2CameraConfig(
                    name=name,
                    image_type=image_type,
                    ip_address=self.ip_address,
                    port=self.port,
                    width=self.camera_width,
                    height=self.camera_height,
                    fps=30,
                )
        return cameras

    def without_cameras(self) -> RobotConfig:
        return attrs.evolve(
            self,
            cameras={},
            with_left_teleop_camera=False,
            with_right_teleop_camera=False,
            with_torso_camera=False,
        )


def _unitree_g1_gains(part: str) -> list[float]:
    from rlctl.adapters.robots.unitree_g1_joints import default_gains

    return default_gains(part)


@RobotConfig.register("unitree_g1")
@attrs.frozen(kw_only=True)
class UnitreeG1Config(RobotConfig):
    """Unitree's G1 humanoid (29 joints), as LeRobot 0.6.1's `unitree_g1` with
    `is_simulation=false`: joint targets (`<joint>.q`, radians) and per-joint gains sent as JSON
    over ZeroMQ to LeRobot's bridge on the robot (`run_g1_server.py`, which relays them to
    Unitree's SDK), the robot's low-level state read back from it. LeRobot's fields and
    defaults; the simulator is refused (see the guide)."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.unitree_g1:unitree_g1"

    # Position gains per joint, in LeRobot's joint order (29).
    kp: list[float] = attrs.field(factory=lambda: _unitree_g1_gains("kp"))
    # Damping gains per joint, in LeRobot's joint order (29).
    kd: list[float] = attrs.field(factory=lambda: _unitree_g1_gains("kd"))
    # LeRobot's pose for its `reset()` (29 radians); no rlctl command moves the robot to it.
    default_positions: list[float] = attrs.field(factory=lambda: [0.0] * 29)
    # LeRobot's state-polling period; rlctl reads each state message as it comes.
    control_dt: float = 1.0 / 250.0
    # LeRobot's default (its MuJoCo simulator); rlctl drives the real robot only: set false.
    is_simulation: bool = True
    # The robot's address, where the bridge runs.
    robot_ip: str = "192.168.123.164"
    # Cameras (LeRobot's are ZMQ ones: `{type: zmq, server_address: <robot_ip>, port: 5555}`).
    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)
    # LeRobot's arm gravity compensation: each command carries the torques that hold the arms
    # at their goals (pinocchio's RNEA on the G1's URDF; the `unitree_g1` extra).
    gravity_compensation: bool = False
    # LeRobot's lower-body locomotion controller: GrootLocomotionController or
    # HolosomaLocomotionController (ONNX policies from the Hub run beside the robot, driving the
    # legs and the waist from the remote's axes; the action is then the arms and those axes).
    controller: str | None = None
    # rlctl's: where the controller's ONNX files come from instead of LeRobot's Hub repo (another
    # repo, or a local folder holding the same files).
    controller_repo: str | None = None
    # rlctl's: the Hub repo with the G1's URDF for the gravity compensation (LeRobot's), or a
    # local folder laid out like it (`assets/g1_body29_hand14.urdf`).
    assets: str = "lerobot/unitree-g1-mujoco"
    # rlctl's: the bridge's command port (LeRobot's is fixed at 6000).
    lowcmd_port: int = 6000
    # rlctl's: the bridge's state port (LeRobot's is fixed at 6001).
    lowstate_port: int = 6001
    # rlctl's: how long connecting waits for the first state (LeRobot's 10 s).
    connect_timeout_s: float = 10.0
    # rlctl's: no good state for this long is one error naming the bridge (LeRobot keeps the
    # last state forever).
    observation_timeout_s: float = 1.0
    # rlctl's: the most a joint moves in one step from its present position (radians); none:
    # no cap (LeRobot has none).
    max_relative_target: float | None = 0.5
    # Send LeRobot's zero-gain command on disconnect (the joints go limp: the robot must be
    # held or hung), as LeRobot always does.
    disable_torque_on_disconnect: bool = True

    def __attrs_post_init__(self) -> None:
        from rlctl.adapters.robots.unitree_g1_joints import check_config

        check_config(self)


def _default_env() -> EnvConfig:
    from rlctl.adapters.sim.envs.metaworld import MetaworldEnv

    return MetaworldEnv(obs_type="state")


@RobotConfig.register("sim")
@attrs.frozen(kw_only=True)
class SimRobotConfig(RobotConfig):
    """Any registered simulator as a robot: `--robot.env.type=pusht`. Each episode resets the
    env with seed `seed + episode`; the episode ends when the env ends it."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.sim_robot:sim_robot"

    env: EnvConfig = attrs.field(factory=_default_env)
    seed: int = 0
    # Keep to the wall clock (a person teleoperating); off, the simulator steps flat out.
    realtime: bool = False


@RobotConfig.register("scripted")
@attrs.frozen(kw_only=True)
class ScriptedRobotConfig(RobotConfig):
    """Joints that go where they are told and optional cameras (synthetic ones need no
    device): a dry run of the whole recording pipeline with no hardware."""

    adapter: ClassVar[str] = "rlctl.adapters.robots.scripted:scripted_robot"

    joints: tuple[str, ...] = ("shoulder_pan", "shoulder_lift", "elbow_flex", "gripper")
    cameras: dict[str, CameraConfig] = attrs.field(factory=dict)
    max_relative_target: float | None = None
    realtime: bool = True


def _structure_max_relative(data: Any, _: type) -> float | dict[str, float] | None:
    if data is None or isinstance(data, Mapping):
        return None if data is None else {str(k): float(v) for k, v in data.items()}
    if isinstance(data, bool) or not isinstance(data, int | float):
        raise ConfigError(
            f"expected a number or a mapping of motor to number, got {data!r}",
            where="max_relative_target",
        )
    return float(data)


converter.register_structure_hook_func(lambda t: t == MaxRelativeTarget, _structure_max_relative)


# Every robot type: the ones above, rlctl's own in other modules, and the `rlctl.robots` entry
# points of installed packages (rlctl's own are declared there too, in adapters/pyproject.toml).
ROBOT_TYPES = PluginKind(RobotConfig, "rlctl.robots", (), noun="robot")


def make_robot(config: RobotConfig, *, calibration_store: CalibrationStore) -> Robot:
    """What the container calls: `container.robot(config)`."""
    return config.build(calibration_store)
