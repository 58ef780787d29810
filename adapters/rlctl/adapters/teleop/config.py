"""Teleoperator configs: a tagged union on `type`, each member naming the adapter that builds it.

    --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue

Fields and defaults are LeRobot 0.6.1's for the leader arms. The scripted kinds need no
hardware: `metaworld_expert` acts as Meta-World's expert policy for the sim robot's task,
`replay` plays an episode of a dataset back, `scripted` swings the joints on a sine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from rlctl.adapters.robots.device_config import DeviceConfig
from rlctl.domain.config import Register, tagged_union
from rlctl.domain.errors import ConfigError
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


@TeleoperatorConfig.register("gamepad")
@attrs.frozen(kw_only=True)
class GamepadTeleopConfig(TeleoperatorConfig):
    """A gamepad through hidapi: end-effector deltas `delta_x, delta_y, delta_z` and a gripper
    command, LeRobot's mapping (docs/guides/teleoperators.md)."""

    adapter: ClassVar[str] = "rlctl.adapters.teleop.gamepad:gamepad"

    # Add the gripper command (0 close, 1 stay, 2 open) after the three deltas.
    use_gripper: bool = True
    # LeRobot reads the gamepad through pygame unless this is set; rlctl always reads it
    # through hidapi, so the setting is accepted and changes nothing.
    hidapi_fallback: bool = False


@TeleoperatorConfig.register("keyboard_ee")
@attrs.frozen(kw_only=True)
class KeyboardEndEffectorTeleopConfig(TeleoperatorConfig):
    """The keyboard as LeRobot's `keyboard_ee`: arrows, Shift and Ctrl give end-effector deltas
    and a gripper command (docs/guides/teleoperators.md). Needs a desktop session pynput can
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
