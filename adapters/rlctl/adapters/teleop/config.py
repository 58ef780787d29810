"""Teleoperator configs: a tagged union on `type`, each member naming the adapter that builds it.

    --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue

Fields and defaults are LeRobot 0.6.1's for the leader arms. The scripted kinds need no
hardware: `metaworld_expert` acts as Meta-World's expert policy for the sim robot's task,
`replay` plays an episode of a dataset back, `scripted` swings the joints on a sine.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from rlctl.adapters.robots.device_config import DeviceConfig
from rlctl.domain.config import Register, tagged_union, type_name_of
from rlctl.domain.errors import ConfigError
from rlctl.domain.network_address import check_host, check_port
from rlctl.domain.plugins import PluginKind

if TYPE_CHECKING:
    from rlctl.application.ports.robot import CalibrationStore
    from rlctl.application.ports.teleoperator import Teleoperator


@tagged_union
@attrs.frozen(kw_only=True)
class TeleoperatorConfig(DeviceConfig):
    calibration_kind: ClassVar[Literal["robots", "teleoperators"]] = "teleoperators"
    register: ClassVar[Register]

    def build(self, calibration_store: CalibrationStore) -> Teleoperator:
        return self._make(calibration_store)

    def paired_with(self, robot: Any) -> TeleoperatorConfig:
        """These settings completed from the robot's config, for what they leave open (a
        scripted teleoperator that follows the robot's task); as they are by default."""
        return self


@attrs.frozen(kw_only=True)
class SOLeaderConfig(TeleoperatorConfig):
    adapter: ClassVar[str] = "rlctl.adapters.teleop.so_leader:so_leader"

    port: str
    use_degrees: bool = True
    num_read_retries: int = 2


@TeleoperatorConfig.register("so101_leader")
@attrs.frozen(kw_only=True)
class SO101LeaderConfig(SOLeaderConfig):
    pass


@TeleoperatorConfig.register("so100_leader")
@attrs.frozen(kw_only=True)
class SO100LeaderConfig(SOLeaderConfig):
    pass


@attrs.frozen(kw_only=True)
class SOLeaderArmConfig:
    """One arm of a bimanual SO leader: LeRobot 0.6.1's `SOLeaderConfig` (no id, no type)."""

    # The arm's motors board (`rlctl find-port`).
    port: str
    use_degrees: bool = True
    num_read_retries: int = 2


@TeleoperatorConfig.register("bi_so_leader")
@attrs.frozen(kw_only=True)
class BiSOLeaderConfig(TeleoperatorConfig):
    """Two SO leader arms as one teleoperator (LeRobot's `bi_so_leader`): actions `left_*` then
    `right_*`, each arm calibrated as `so_leader` `<id>_left` / `<id>_right`."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.bi_so_leader:bi_so_leader"

    # The left arm: an SO leader's settings, less its id (`<id>_left`) and type.
    left_arm_config: SOLeaderArmConfig
    # The right arm, likewise (`<id>_right`).
    right_arm_config: SOLeaderArmConfig

    def arm(self, side: Literal["left", "right"]) -> SOLeaderConfig:
        arm: SOLeaderArmConfig = getattr(self, f"{side}_arm_config")
        return SO101LeaderConfig(
            id=f"{self.id}_{side}" if self.id else None,
            calibration_dir=self.calibration_dir,
            **attrs.asdict(arm, recurse=False),
        )


@TeleoperatorConfig.register("koch_leader")
@attrs.frozen(kw_only=True)
class KochLeaderConfig(TeleoperatorConfig):
    adapter: ClassVar[str] = "rlctl.adapters.teleop.koch_leader:koch_leader"

    port: str
    # The leader's gripper is held (current-limited) here, so it springs back when released.
    gripper_open_pos: float = 50.0


@TeleoperatorConfig.register("omx_leader")
@attrs.frozen(kw_only=True)
class OmxLeaderConfig(TeleoperatorConfig):
    """ROBOTIS's OMX leader arm: six Dynamixel XL330 servos, ids 1 to 6, calibrated at the
    factory (LeRobot 0.6.1's `omx_leader`)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.omx_leader:omx_leader"

    port: str
    # The leader's gripper is held (current-limited) here, so it springs back when released.
    gripper_open_pos: float = 60.0


SO_ARM_MOTORS = (
    "shoulder_pan",
    "shoulder_lift",
    "elbow_flex",
    "wrist_flex",
    "wrist_roll",
    "gripper",
)


def check_end_effector_settings(config: Any) -> None:
    """The workspace box, the steps and the motors of an end-effector teleoperator's settings."""
    lows, highs = config.end_effector_bounds_min, config.end_effector_bounds_max
    numbers = [*lows, *highs, *config.end_effector_step_sizes, config.max_ee_step_m]
    if not all(math.isfinite(float(v)) for v in numbers):
        raise ConfigError(
            "the end-effector settings must be finite numbers",
            where="teleop.end_effector_bounds_min",
        )
    if any(low > high for low, high in zip(lows, highs, strict=True)):
        raise ConfigError(
            f"end_effector_bounds_min {lows} is above end_effector_bounds_max {highs}",
            where="teleop.end_effector_bounds_min",
        )
    if any(size < 0 for size in config.end_effector_step_sizes) or config.max_ee_step_m <= 0:
        raise ConfigError(
            f"end_effector_step_sizes {config.end_effector_step_sizes} and max_ee_step_m "
            f"{config.max_ee_step_m} must be positive",
            where="teleop.end_effector_step_sizes",
        )
    if not config.motor_names or config.motor_names[-1] != "gripper":
        raise ConfigError(
            f"motor_names {config.motor_names} must end with the gripper",
            where="teleop.motor_names",
            hint="the robot's motors in its action's order, `gripper` last",
        )


# Not slotted: the teleoperator configs below inherit it beside TeleoperatorConfig.
@attrs.frozen(kw_only=True, slots=False)
class EndEffectorToJointsConfig:
    """LeRobot's `processor.inverse_kinematics` settings (and `max_gripper_pos`), for an
    end-effector teleoperator on a joint-space arm. Without `urdf_path` the teleoperator gives
    its deltas as they are (for a robot that takes them)."""

    # The arm's URDF (for the SO-101: SO101/so101_new_calib.urdf of TheRobotStudio/SO-ARM100)
    # and its end-effector frame; set, the deltas become the arm's joint goals.
    urdf_path: str | None = None
    target_frame_name: str = "gripper_frame_link"
    # The robot's motors, in its action's order, the gripper last (the SO arms' by default).
    motor_names: tuple[str, ...] = SO_ARM_MOTORS
    # Metres the end-effector target moves per tick at a full delta, per axis (rlctl's default:
    # LeRobot leaves it to the config, its HIL-SERL examples use 0.025).
    end_effector_step_sizes: tuple[float, float, float] = (0.01, 0.01, 0.01)
    # The box the target is clipped to (metres, the robot's base frame), and the largest step
    # of the target per tick (LeRobot's `EEBoundsAndSafety` default).
    end_effector_bounds_min: tuple[float, float, float] = (-1.0, -1.0, -1.0)
    end_effector_bounds_max: tuple[float, float, float] = (1.0, 1.0, 1.0)
    max_ee_step_m: float = 0.05
    # The gripper's goal when closing (LeRobot's `max_gripper_pos`); opening goes to 0.
    max_gripper_pos: float = 100.0

    def __attrs_post_init__(self) -> None:
        check_end_effector_settings(self)


@TeleoperatorConfig.register("gamepad")
@attrs.frozen(kw_only=True)
class GamepadTeleopConfig(TeleoperatorConfig, EndEffectorToJointsConfig):
    """A gamepad through hidapi: end-effector deltas `delta_x, delta_y, delta_z` and a gripper
    command, LeRobot's mapping; with `urdf_path`, the arm's joint goals by inverse kinematics
    (docs/guides/teleoperators.md)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.gamepad:gamepad"

    # Add the gripper command (0 close, 1 stay, 2 open) after the three deltas.
    use_gripper: bool = True
    # LeRobot reads the gamepad through pygame unless this is set; rlctl always reads it
    # through hidapi, so the setting is accepted and changes nothing.
    hidapi_fallback: bool = False


@TeleoperatorConfig.register("phone")
@attrs.frozen(kw_only=True)
class PhoneConfig(TeleoperatorConfig):
    """A phone's pose as LeRobot's `phone` teleoperator reads it, turned into the arm's joint
    goals by LeRobot's phone-to-SO-100 steps and inverse kinematics on the arm's URDF.

    Android: the `teleop` package's WebXR page, served over HTTPS on the local network; open
    `https://<this computer's IP>:<port>` in the phone's Chrome, start the AR session, and hold
    the move button to drive the arm (A opens, B closes the gripper). iOS (HEBI's closed Mobile
    I/O app) is not supported."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.phone:phone"

    # `android` (the `teleop` package's WebXR page) or `ios` (LeRobot's default, refused: it
    # needs HEBI's closed Mobile I/O library).
    phone_os: Literal["android", "ios"] = "ios"
    # LeRobot's offset of the phone's camera from its centre, metres (phone frame).
    camera_offset: tuple[float, float, float] = (0.0, -0.02, 0.04)
    # The web server the phone connects to (the `teleop` package's defaults; port 0: any free).
    host: str = "0.0.0.0"
    port: int = 4443
    # The arm's URDF (for the SO-101: SO101/so101_new_calib.urdf of TheRobotStudio/SO-ARM100)
    # and its end-effector frame.
    urdf_path: str | None = None
    target_frame_name: str = "gripper_frame_link"
    # The robot's motors, in its action's order, the gripper last (the SO arms' by default).
    motor_names: tuple[str, ...] = SO_ARM_MOTORS
    # LeRobot's phone_to_so100 example: metres of end-effector motion per metre of phone motion,
    # the workspace the target is clipped to (metres, the robot's base frame), the largest step
    # of the target per tick, and the gripper's speed (percent per tick at full button).
    end_effector_step_sizes: tuple[float, float, float] = (0.5, 0.5, 0.5)
    end_effector_bounds_min: tuple[float, float, float] = (-1.0, -1.0, -1.0)
    end_effector_bounds_max: tuple[float, float, float] = (1.0, 1.0, 1.0)
    max_ee_step_m: float = 0.10
    gripper_speed_factor: float = 20.0
    # Seconds `connect` waits for the first touch of the move button (the calibration pose).
    calibration_timeout_s: float = 120.0
    # A phone silent this long is taken as released: the arm holds its last goal.
    message_timeout_s: float = 0.5

    def __attrs_post_init__(self) -> None:
        if self.phone_os not in ("android", "ios"):
            raise ConfigError(
                f"unknown phone_os {self.phone_os!r}",
                where="teleop.phone_os",
                hint="android or ios",
            )
        check_end_effector_settings(self)


@TeleoperatorConfig.register("keyboard_ee")
@attrs.frozen(kw_only=True)
class KeyboardEndEffectorTeleopConfig(TeleoperatorConfig, EndEffectorToJointsConfig):
    """The keyboard as LeRobot's `keyboard_ee`: arrows, Shift and Ctrl give end-effector deltas
    and a gripper command; with `urdf_path`, the arm's joint goals by inverse kinematics
    (docs/guides/teleoperators.md). Needs a desktop session pynput can
    listen to (X11, Windows, macOS with input monitoring allowed)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.keyboard:keyboard_ee"

    # Add the gripper command (0 close, 1 stay, 2 open) after the three deltas.
    use_gripper: bool = True


BASE_KEY_ROLES = (
    "forward",
    "backward",
    "left",
    "right",
    "rotate_left",
    "rotate_right",
    "speed_up",
    "speed_down",
)


def _lekiwi_teleop_keys() -> dict[str, str]:
    from rlctl.adapters.robots.config import lekiwi_teleop_keys

    return lekiwi_teleop_keys()


@TeleoperatorConfig.register("lekiwi_keyboard")
@attrs.frozen(kw_only=True)
class LeKiwiKeyboardConfig(SOLeaderConfig):
    """LeKiwi driven as LeRobot's `examples/lekiwi/teleoperate.py` drives it: an SO leader arm
    (its `port`, `id` and calibration, as `so101_leader`'s) moves LeKiwi's arm, and keys held on
    the keyboard (pynput, `rlctl[keyboard]`) its base: w/s forward/back, a/d left/right, z/x
    turn, r/f faster/slower (0.1, 0.2, 0.3 m/s; 30, 60, 90 deg/s)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.lekiwi_keyboard:lekiwi_keyboard"

    # LeRobot's `teleop_keys`; paired with `lekiwi_client`, the robot's own when left as they are.
    teleop_keys: dict[str, str] = attrs.field(factory=_lekiwi_teleop_keys)

    def __attrs_post_init__(self) -> None:
        missing = [role for role in BASE_KEY_ROLES if not self.teleop_keys.get(role)]
        if missing:
            raise ConfigError(
                f"teleop_keys has no key for {', '.join(missing)}",
                where="teleop_keys",
                hint="give a key for each of " + ", ".join(BASE_KEY_ROLES),
            )

    def paired_with(self, robot: Any) -> TeleoperatorConfig:
        theirs = getattr(robot, "teleop_keys", None)
        if isinstance(theirs, dict) and self.teleop_keys == _lekiwi_teleop_keys():
            return attrs.evolve(self, teleop_keys={**self.teleop_keys, **theirs})
        return self


@TeleoperatorConfig.register("reachy2_teleoperator")
@attrs.frozen(kw_only=True)
class Reachy2TeleoperatorConfig(TeleoperatorConfig):
    """A Reachy 2 read as a teleoperator, as LeRobot 0.6.1's `reachy2_teleoperator`: its goal
    positions (or, with `use_present_position`, its present ones) and its base's last commanded
    (or measured) velocity, under the `reachy2` robot's action names: the robot driven by
    another program (Pollen's VR teleoperation app) is what gets recorded."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.reachy2_teleoperator:reachy2_teleoperator"

    # The robot's address on the network.
    ip_address: str | None = "localhost"
    # The joints' present positions and the base's measured velocity instead of their goals.
    use_present_position: bool = False
    # The parts in use (as the robot's `with_*`).
    with_mobile_base: bool = True
    with_l_arm: bool = True
    with_r_arm: bool = True
    with_neck: bool = True
    with_antennas: bool = True
    # rlctl's: the SDK server's port (reachy2_sdk's `sdk_port`), and how long a request may take.
    sdk_port: int = 50051
    request_timeout_s: float = 1.0

    def __attrs_post_init__(self) -> None:
        parts = ("with_mobile_base", "with_l_arm", "with_r_arm", "with_neck", "with_antennas")
        if not any(getattr(self, part) for part in parts):
            raise ConfigError(
                "no Reachy 2 part is used",
                where="teleop.with_*",
                hint="set at least one of " + ", ".join(parts) + " to true",
            )
        check_host(
            self.ip_address or "", where="teleop.ip_address", what="the robot",
            example="192.168.1.42", port_setting="teleop.sdk_port",
        )  # fmt: skip
        check_port(self.sdk_port, where="teleop.sdk_port")
        if not 0 < self.request_timeout_s < math.inf:
            raise ConfigError(
                f"request_timeout_s must be positive, got {self.request_timeout_s!r}",
                where="teleop.request_timeout_s",
            )


@TeleoperatorConfig.register("keyboard_rover")
@attrs.frozen(kw_only=True)
class KeyboardRoverTeleopConfig(TeleoperatorConfig):
    """A mobile robot driven from the keyboard as LeRobot 0.6.1's `keyboard_rover` drives the
    EarthRover Mini Plus (pynput, `rlctl[keyboard]`): w/s forward/back, a/d turn while rolling,
    q/e turn on the spot, x stop, +/= and - faster/slower. Actions are `linear_velocity` and
    `angular_velocity` in the SDK's -1..1; the speeds never pass 1 (rlctl's cap)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.keyboard_rover:keyboard_rover"

    # The speeds w/s and a/d/q/e start at (0..1].
    linear_speed: float = 1.0
    angular_speed: float = 1.0
    # What one tick with + or - held adds to (takes from) the linear speed.
    speed_increment: float = 0.1
    # The share of the linear speed a/d roll forward with, when neither w nor s is held.
    turn_assist_ratio: float = 0.3
    # The angular speed changes by speed_increment times this.
    angular_speed_ratio: float = 0.6
    # The slowest - brings the speeds to.
    min_linear_speed: float = 0.1
    min_angular_speed: float = 0.05

    def __attrs_post_init__(self) -> None:
        bounded = {
            "linear_speed": (False, 1.0),
            "angular_speed": (False, 1.0),
            "speed_increment": (True, 1.0),
            "turn_assist_ratio": (True, 1.0),
            "angular_speed_ratio": (True, 10.0),
            "min_linear_speed": (True, 1.0),
            "min_angular_speed": (True, 1.0),
        }
        for field, (zero_ok, high) in bounded.items():
            value = getattr(self, field)
            low_ok = value >= 0 if zero_ok else value > 0
            if not (low_ok and value <= high):
                raise ConfigError(
                    f"{field} must be in {'[' if zero_ok else '('}0, {high:g}], got {value!r}",
                    where=f"teleop.{field}",
                )


@TeleoperatorConfig.register("metaworld_expert")
@attrs.frozen(kw_only=True)
class MetaWorldExpertConfig(TeleoperatorConfig):
    """Meta-World's scripted expert for the sim robot's task (with `--robot.env.obs_type=state`)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.metaworld_expert:metaworld_expert"
    # The Meta-World task name(s) (push-v3, or push-v3,reach-v3). None: the sim robot's
    # `robot.env.task`. The expert acting is found from the task text the sim robot reports,
    # among these tasks (push-v3 and push-back-v3 share a text).
    task: str | None = None

    def paired_with(self, robot: Any) -> TeleoperatorConfig:
        env = getattr(robot, "env", None)
        if self.task is not None or env is None or getattr(env, "type", None) != "metaworld":
            return self
        names = dict.fromkeys(task.name for task in env.tasks())
        return attrs.evolve(self, task=",".join(names)) if names else self


@TeleoperatorConfig.register("replay")
@attrs.frozen(kw_only=True)
class ReplayTeleopConfig(TeleoperatorConfig):
    """The actions of one recorded episode, in order; the last one is held after the end."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.episode_replay:episode_replay"

    # A dataset folder, or a repo id under $HF_LEROBOT_HOME.
    dataset: str = ""
    episode: int = 0


def _openarm_leader_motors() -> dict[str, tuple[int, int, str]]:
    from rlctl.adapters.robots.config import openarm_motor_config

    return openarm_motor_config()


# Not slotted: the teleoperator config below inherits it beside TeleoperatorConfig.
@attrs.frozen(kw_only=True, slots=False)
class OpenArmLeaderArmConfig:
    """One OpenArm leader's settings (LeRobot 0.6.1's `OpenArmLeaderConfigBase`): Damiao
    motors on one CAN bus, moved by hand."""

    # The arm's CAN interface (`can3`; a /dev path with can_interface=slcan).
    port: str
    # python-can's interface: socketcan (Linux), slcan (serial adapters), virtual, or auto.
    can_interface: str = "socketcan"
    use_can_fd: bool = True
    can_bitrate: int = 1_000_000
    can_data_bitrate: int = 5_000_000
    # Motor name -> (send id, receive id, model).
    motor_config: dict[str, tuple[int, int, str]] = attrs.field(factory=_openarm_leader_motors)
    # Torque off, so the arm moves by hand (off: the motors are enabled in MIT mode).
    manual_control: bool = True
    # Also send each motor's velocity (`.vel`) and torque (`.torque`) in the action.
    use_velocity_and_torque: bool = False
    # MIT gains, one per motor in motor_config's order (used when manual_control is off).
    position_kp: list[float] = attrs.field(
        factory=lambda: [240.0, 240.0, 240.0, 240.0, 24.0, 31.0, 25.0, 16.0]
    )
    position_kd: list[float] = attrs.field(factory=lambda: [3.0, 3.0, 3.0, 3.0, 0.2, 0.2, 0.2, 0.2])
    # rlctl's: how long the motors' answers to one exchange may take, and extra attempts.
    can_timeout_s: float = 0.01
    can_retries: int = 2


@TeleoperatorConfig.register("openarm_leader")
@attrs.frozen(kw_only=True)
class OpenArmLeaderConfig(TeleoperatorConfig, OpenArmLeaderArmConfig):
    """An OpenArm moved by hand as a leader: its settings, an id and a calibration folder."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.openarm_leader:openarm_leader"


@TeleoperatorConfig.register("bi_openarm_leader")
@attrs.frozen(kw_only=True)
class BiOpenArmLeaderConfig(TeleoperatorConfig):
    """Two OpenArm leaders as one teleoperator (LeRobot's `bi_openarm_leader`): actions
    `left_*` then `right_*`, each arm calibrated as `openarm_leader` `<id>_left` / `<id>_right`."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.openarm_leader:bi_openarm_leader"

    # The left arm: an OpenArm leader's settings, less its id (`<id>_left`) and type.
    left_arm_config: OpenArmLeaderArmConfig
    # The right arm, likewise (`<id>_right`).
    right_arm_config: OpenArmLeaderArmConfig

    def arm(self, side: Literal["left", "right"]) -> OpenArmLeaderConfig:
        arm: OpenArmLeaderArmConfig = getattr(self, f"{side}_arm_config")
        return OpenArmLeaderConfig(
            id=f"{self.id}_{side}" if self.id else None,
            calibration_dir=self.calibration_dir,
            **attrs.asdict(arm, recurse=False),
        )


def _rebot_102_ids() -> dict[str, int]:
    from rlctl.adapters.robots.config import REBOT_B601_JOINTS

    return {name: i for i, name in enumerate(REBOT_B601_JOINTS)}


def _rebot_102_ranges() -> dict[str, list[int]]:
    from rlctl.adapters.robots.config import REBOT_B601_LIMITS

    return {name: [int(low), int(high)] for name, (low, high) in REBOT_B601_LIMITS.items()}


# Not slotted: the teleoperator config below inherits it beside TeleoperatorConfig.
@attrs.frozen(kw_only=True, slots=False)
class Rebot102LeaderArmConfig:
    """One Seeed reBot Arm 102 (StarArm102) leader's settings (LeRobot 0.6.1's
    `RebotArm102LeaderConfig`): seven FashionStar UART servos, moved by hand."""

    # The leader's USB-to-UART adapter (`/dev/ttyUSB0`; `rlctl find-port`).
    port: str
    baudrate: int = 1_000_000
    # Servo id of each joint on the bus.
    joint_ids: dict[str, int] = attrs.field(factory=_rebot_102_ids)
    # Sign (and scale: the gripper's -6 widens it to the B601's travel) applied to each angle.
    joint_directions: dict[str, int] = attrs.field(
        factory=lambda: {
            "shoulder_pan": -1,
            "shoulder_lift": -1,
            "elbow_flex": 1,
            "wrist_flex": 1,
            "wrist_yaw": 1,
            "wrist_roll": -1,
            "gripper": -6,
        }
    )
    # Each joint's [min, max] output in degrees (the B601 follower's limits).
    joint_ranges: dict[str, list[int]] = attrs.field(factory=_rebot_102_ranges)
    # rlctl's: how long the servos' answers to one read may take, and extra attempts.
    timeout_s: float = 0.05
    retries: int = 2


@TeleoperatorConfig.register("rebot_102_leader")
@attrs.frozen(kw_only=True)
class Rebot102LeaderConfig(TeleoperatorConfig, Rebot102LeaderArmConfig):
    """A reBot Arm 102 leader: its settings, an id and a calibration folder."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.rebot_102_leader:rebot_102_leader"


@TeleoperatorConfig.register("bi_rebot_102_leader")
@attrs.frozen(kw_only=True)
class BiRebot102LeaderConfig(TeleoperatorConfig):
    """Two reBot Arm 102 leaders as one teleoperator (LeRobot's `bi_rebot_102_leader`): actions
    `left_*` then `right_*`, each arm calibrated as `rebot_102_leader` `<id>_left` /
    `<id>_right`."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.rebot_102_leader:bi_rebot_102_leader"

    # The left arm: a reBot Arm 102 leader's settings, less its id (`<id>_left`) and type.
    left_arm_config: Rebot102LeaderArmConfig
    # The right arm, likewise (`<id>_right`).
    right_arm_config: Rebot102LeaderArmConfig

    def arm(self, side: Literal["left", "right"]) -> Rebot102LeaderConfig:
        arm: Rebot102LeaderArmConfig = getattr(self, f"{side}_arm_config")
        return Rebot102LeaderConfig(
            id=f"{self.id}_{side}" if self.id else None,
            calibration_dir=self.calibration_dir,
            **attrs.asdict(arm, recurse=False),
        )


def _check_mini_side(_: Any, __: attrs.Attribute[str | None], value: str | None) -> None:
    if value not in (None, "left", "right"):
        raise ConfigError(
            f"side must be left, right or unset, got {value!r}",
            where="teleop.side",
            hint="`left` and `right` flip the joints LeRobot flips for that arm; unset, none is "
            "flipped",
        )


# Not slotted: the teleoperator config below inherits it beside TeleoperatorConfig.
@attrs.frozen(kw_only=True, slots=False)
class OpenArmMiniArmConfig:
    """One OpenArm Mini's settings (LeRobot 0.6.1's `OpenArmMiniConfigBase`): eight Feetech
    STS3215 servos on one motors board, moved by hand."""

    # The arm's motors board (`rlctl find-port`).
    port: str
    # left / right: the joints whose direction LeRobot flips for that arm; unset, none.
    side: str | None = attrs.field(default=None, validator=_check_mini_side)
    # Kept for LeRobot's configs: the joints are read in degrees either way, as LeRobot does.
    use_degrees: bool = True
    # rlctl's: extra attempts of a read the motors did not answer.
    num_read_retries: int = 2


@TeleoperatorConfig.register("openarm_mini")
@attrs.frozen(kw_only=True)
class OpenArmMiniConfig(TeleoperatorConfig, OpenArmMiniArmConfig):
    """An OpenArm Mini as the leader of an OpenArm follower: its settings, an id and a
    calibration folder (`teleoperators/openarm_mini/<id>.json`)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.openarm_mini:openarm_mini"


@TeleoperatorConfig.register("bi_openarm_mini")
@attrs.frozen(kw_only=True)
class BiOpenArmMiniConfig(TeleoperatorConfig):
    """Two OpenArm Minis as one teleoperator (LeRobot's `bi_openarm_mini`): actions `left_*`
    then `right_*`, each arm calibrated as `openarm_mini` `<id>_left` / `<id>_right`, its side
    the one it is on whatever its `side` says (as LeRobot does)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.openarm_mini:bi_openarm_mini"

    # The left arm: an OpenArm Mini's settings, less its id (`<id>_left`) and type.
    left_arm_config: OpenArmMiniArmConfig
    # The right arm, likewise (`<id>_right`).
    right_arm_config: OpenArmMiniArmConfig

    def arm(self, side: Literal["left", "right"]) -> OpenArmMiniConfig:
        arm: OpenArmMiniArmConfig = getattr(self, f"{side}_arm_config")
        return OpenArmMiniConfig(
            id=f"{self.id}_{side}" if self.id else None,
            calibration_dir=self.calibration_dir,
            **{**attrs.asdict(arm, recurse=False), "side": side},
        )


def _check_hand_side(_: Any, __: attrs.Attribute[str], value: str) -> None:
    if value not in ("left", "right"):
        raise ConfigError(
            f"side must be left or right, got {value!r}",
            where="teleop.side",
            hint="the hand the glove is worn on: it picks the joints LeRobot reads in reverse",
        )


@attrs.frozen(kw_only=True)
class HomunculusConfig(TeleoperatorConfig):
    """A Homunculus board (LeRobot 0.6.1's): an ESP32 streaming its joints as text lines."""

    # The board's USB serial port (`rlctl find-port`).
    port: str
    baud_rate: int = 115_200
    # rlctl's: how long a read waits for the board's next line before naming it silent
    # (twice that for the first line, on connect: LeRobot's 2 s).
    timeout_s: float = 1.0


@TeleoperatorConfig.register("homunculus_arm")
@attrs.frozen(kw_only=True)
class HomunculusArmConfig(HomunculusConfig):
    """The Homunculus exoskeleton arm, the Hope JR arm's leader
    (`teleoperators/homunculus_arm/<id>.json`)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.homunculus:homunculus_arm"


@TeleoperatorConfig.register("homunculus_glove")
@attrs.frozen(kw_only=True)
class HomunculusGloveConfig(HomunculusConfig):
    """The Homunculus glove, the Hope JR hand's leader
    (`teleoperators/homunculus_glove/<id>.json`)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.homunculus:homunculus_glove"

    # left / right: the hand it is worn on.
    side: str = attrs.field(validator=_check_hand_side)


@attrs.frozen(kw_only=True)
class ExoskeletonArmPortConfig:
    """One arm of the G1 exoskeleton (LeRobot's `ExoskeletonArmPortConfig`): its board's port."""

    # The arm board's USB serial port (`rlctl find-port`); both arms need theirs (LeRobot's
    # joystick-only mode, both empty, is refused).
    port: str = ""
    # The board's serial speed (its firmware prints at 115200).
    baud_rate: int = 115_200


@TeleoperatorConfig.register("unitree_g1")
@attrs.frozen(kw_only=True)
class UnitreeG1TeleoperatorConfig(TeleoperatorConfig):
    """LeRobot 0.6.1's Unitree G1 exoskeleton: two arm boards streaming hall-sensor angles,
    turned into the G1's 14 arm joints by inverse kinematics, plus the boards' joysticks as
    `remote.lx/ly/rx/ry` (`teleoperators/unitree_g1/<id>_left.json` and `<id>_right.json`)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.unitree_g1_exo:unitree_g1_exoskeleton"

    left_arm_config: ExoskeletonArmPortConfig = attrs.field(factory=ExoskeletonArmPortConfig)
    right_arm_config: ExoskeletonArmPortConfig = attrs.field(factory=ExoskeletonArmPortConfig)
    # G1 arm joints the IK leaves where they are (comma-separated URDF names,
    # e.g. "left_wrist_yaw_joint,right_wrist_yaw_joint").
    frozen_joints: str = ""
    # rlctl's: the Hub repo holding the G1's and the exoskeleton's URDFs (LeRobot's), or a local
    # folder laid out like it (`assets/g1_body29_hand14.urdf`, `assets/exo_left.urdf`, ...).
    assets: str = "lerobot/unitree-g1-mujoco"
    # rlctl's: how long a read waits for a board's next line before naming it silent (twice
    # that for the first line, on connect).
    timeout_s: float = 1.0

    def __attrs_post_init__(self) -> None:
        left, right = (bool(a.port.strip()) for a in (self.left_arm_config, self.right_arm_config))
        if left != right:
            raise ConfigError(
                f"only the {'left' if left else 'right'} exoskeleton arm has a port",
                where="teleop.left_arm_config.port" if not left else "teleop.right_arm_config.port",
                hint="set both --teleop.left_arm_config.port and --teleop.right_arm_config.port "
                "(the exoskeleton reads its two arm boards)",
            )
        for side in ("left", "right"):
            rate = getattr(self, f"{side}_arm_config").baud_rate
            if not isinstance(rate, int) or rate <= 0:
                raise ConfigError(
                    f"baud_rate must be a positive integer, got {rate!r}",
                    where=f"teleop.{side}_arm_config.baud_rate",
                    hint="the boards print at 115200",
                )
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ConfigError(
                f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}",
                where="teleop.timeout_s",
            )

    @property
    def arms_enabled(self) -> bool:
        return bool(self.left_arm_config.port.strip())

    def paired_with(self, robot: Any) -> TeleoperatorConfig:
        """Refused beside a G1 with no locomotion controller: that G1 takes all 29 joints,
        this gives 14 and the remote's axes (LeRobot pairs them only with a controller)."""
        if type_name_of(robot) == "unitree_g1" and getattr(robot, "controller", None) is None:
            raise ConfigError(
                "the exoskeleton gives the G1's 14 arm joints and the remote's axes, which the "
                "G1 takes only while a locomotion controller drives its legs; without one it "
                "takes all 29 joints",
                where="robot.controller",
                hint="add --robot.controller=GrootLocomotionController (or "
                "HolosomaLocomotionController), as with LeRobot",
            )
        return self

    @property
    def frozen(self) -> tuple[str, ...]:
        return tuple(j.strip() for j in self.frozen_joints.split(",") if j.strip())


@TeleoperatorConfig.register("scripted")
@attrs.frozen(kw_only=True)
class ScriptedTeleopConfig(TeleoperatorConfig):
    adapter: ClassVar[str] = "rlctl.adapters.robots.scripted:scripted_teleop"

    joints: tuple[str, ...] = ("shoulder_pan", "shoulder_lift", "elbow_flex", "gripper")
    period_s: float = 3.0
    amplitude: float = 30.0


# Every teleoperator type: the ones above, rlctl's own in other modules, and the
# `rlctl.teleoperators` entry points of installed packages (rlctl's own are declared there too).
TELEOPERATOR_TYPES = PluginKind(TeleoperatorConfig, "rlctl.teleoperators", (), noun="teleoperator")


def make_teleoperator(
    config: TeleoperatorConfig, *, calibration_store: CalibrationStore
) -> Teleoperator:
    """What the container calls: `container.teleoperator(config)`."""
    return config.build(calibration_store)
