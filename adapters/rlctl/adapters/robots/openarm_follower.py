"""`--robot.type=openarm_follower`: an OpenArm, seven joints and a gripper on Damiao motors on
one CAN bus, as LeRobot 0.6.1's `OpenArmFollower` drives it.

Features are LeRobot's: `joint_1.pos` … `gripper.pos` (and `.vel`, `.torque` per motor with
`use_velocity_and_torque`); positions are degrees from the motors' zero. Goals are sent as MIT
commands with the configured gains, after the robot port's `ActionGuard`: finite, inside the
joint limits (`side`'s, else `joint_limits`; a motor without one keeps its calibrated range),
and with `max_relative_target` at most that far from where each joint is.

Calibration is LeRobot's: with the arm hanging straight down and the gripper closed, every motor
is zeroed and given the range -90..90; the file is `robots/openarm_follower/<id>.json` in
LeRobot's calibration folder, so an arm calibrated by either tool is ready in the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import structlog

from rlctl.adapters.cameras.config import build_cameras
from rlctl.adapters.cameras.robot_frames import camera_features, connect_cameras, read_cameras
from rlctl.adapters.robots.buses import motor_bus
from rlctl.adapters.robots.config import OpenArmFollowerConfig
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import (
    ACTION_KEY,
    CalibrationKey,
    CalibrationPlan,
    CalibrationStore,
    CalibrationTarget,
)
from rlctl.application.robot_features import (
    STATE_KEY,
    action_feature,
    joint_names,
    state_feature,
)
from rlctl.domain.action_guard import ActionGuard, ActionLimits, GuardDecision, step_caps
from rlctl.domain.calibration import Calibration, MotorNormMode
from rlctl.domain.errors import CalibrationError, ConfigError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.motors import Motor

if TYPE_CHECKING:
    # python-can loads when the bus is built: a missing one is named with the extra (`can`).
    from rlctl.adapters.motors.damiao import DamiaoMotorBus
    from rlctl.adapters.teleop.config import OpenArmLeaderConfig

log = structlog.get_logger(__name__)

ROBOT_TYPE = "openarm_follower"
ZERO_POSE = "hanging straight down, gripper closed,"
FIXED_RANGE = (-90, 90)  # LeRobot's OpenArm calibration gives every joint this range
# The follower's and the leader's configs share the bus and motor fields.
type OpenArmConfig = OpenArmFollowerConfig | OpenArmLeaderConfig


class DamiaoArm:
    """The arm's motors as a `CalibrationTarget`: the bus, its calibration file, its gains."""

    def __init__(
        self,
        bus: DamiaoMotorBus,
        key: CalibrationKey,
        store: CalibrationStore,
        gains: Mapping[str, tuple[float, float]],
        *,
        hold_torque: bool = True,
    ) -> None:
        """`hold_torque`: configured, the motors are enabled in MIT mode (a follower); off,
        they are left free to be moved by hand (a leader under manual control)."""
        self._bus = bus
        self._key = key
        self._store = store
        self._gains = dict(gains)
        self._hold_torque = hold_torque
        self._calibrated = False
        self.motor_names = list(bus.motors)

    @property
    def calibration_key(self) -> CalibrationKey:
        return self._key

    @property
    def bus(self) -> DamiaoMotorBus:
        return self._bus

    @property
    def calibration_plan(self) -> CalibrationPlan:
        return CalibrationPlan(
            zero_pose=ZERO_POSE, fixed_range=FIXED_RANGE, ids_set_by="Damiao's debugging tool"
        )

    @property
    def is_calibrated(self) -> bool:
        return self._calibrated

    @property
    def is_connected(self) -> bool:
        return self._bus.is_connected

    def prepare_calibration(self) -> None:
        self._bus.disable_torque()

    def apply_calibration(self, calibration: Calibration) -> None:
        self._adopt(calibration)
        self._configure()

    def connect(self) -> None:
        self._bus.connect()
        try:
            saved = self._store.load(self._key)
            if saved is not None:
                self._adopt(saved)
            else:
                log.warning("no calibration saved", device=self._key.label)
            self._configure()
        except BaseException:
            self._bus.disconnect(disable_torque=False)
            raise

    def disconnect(self, *, disable_torque: bool = True) -> None:
        self._bus.disconnect(disable_torque=disable_torque)

    def _adopt(self, calibration: Calibration) -> None:
        missing = [m for m in self.motor_names if m not in calibration.motors]
        if missing:
            raise CalibrationError(
                f"the calibration has no entry for {', '.join(missing)}",
                where=self._key.label,
                hint=f"run `rlctl calibrate` for {self._key.label} again",
            )
        self._bus.write_calibration(calibration)
        self._calibrated = True

    def _configure(self) -> None:
        """LeRobot's: the gains set, then every motor enabled in MIT mode (or left free)."""
        self._bus.sync_write("Kp", {m: kp for m, (kp, _) in self._gains.items()})
        self._bus.sync_write("Kd", {m: kd for m, (_, kd) in self._gains.items()})
        if self._hold_torque:
            self._bus.enable_torque()
        else:
            self._bus.disable_torque()

    def positions(self) -> np.ndarray:
        values = self._bus.sync_read("Present_Position", self.motor_names)
        return np.asarray([values[m] for m in self.motor_names], dtype=np.float32)

    def states(self) -> np.ndarray:
        """Position, velocity and torque of every motor, from one refresh (LeRobot's order)."""
        self._bus.sync_read("Present_Position", self.motor_names)
        values: list[float] = []
        for motor in self.motor_names:
            state = self._bus.last_state(motor)
            assert state is not None  # the read just refreshed it, or raised
            values += [state.position, state.velocity, state.torque]
        return np.asarray(values, dtype=np.float32)

    def write_goals(self, goals: np.ndarray) -> None:
        self._bus.sync_write(
            "Goal_Position", dict(zip(self.motor_names, (float(v) for v in goals), strict=True))
        )


class OpenArmFollower:
    def __init__(
        self,
        arm: DamiaoArm,
        cameras: Mapping[str, Camera],
        camera_sizes: Mapping[str, tuple[int, int]],
        *,
        joint_limits: Mapping[str, tuple[float, float]],
        max_relative_target: float | Mapping[str, float] | None = None,
        use_velocity_and_torque: bool = False,
        disable_torque_on_disconnect: bool = True,
    ) -> None:
        self.arm = arm
        self._cameras = dict(cameras)
        self._sizes = dict(camera_sizes)
        unknown = sorted(set(joint_limits) - set(arm.motor_names))
        if unknown:
            raise ConfigError(
                f"joint_limits names motors the arm does not have: {', '.join(unknown)}",
                where="robot.joint_limits",
                hint=f"the arm's motors: {', '.join(arm.motor_names)}",
            )
        self._limits = dict(joint_limits)
        if max_relative_target is not None:
            step_caps(max_relative_target, arm.motor_names)  # a wrong motor name fails now
        self._max_step = max_relative_target
        self._full_state = use_velocity_and_torque
        self._torque_off_on_disconnect = disable_torque_on_disconnect
        self._names = joint_names(arm.motor_names)
        self._guard: ActionGuard | None = None

    @property
    def robot_type(self) -> str:
        return ROBOT_TYPE

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        if self._full_state:
            names = [
                f"{motor}{suffix}"
                for motor in self.arm.motor_names
                for suffix in (".pos", ".vel", ".torque")
            ]
        else:
            names = self._names
        features = {STATE_KEY: state_feature(names)}
        return {**features, **camera_features(self._cameras, self._sizes)}

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self._names)}

    @property
    def realtime(self) -> bool:
        return True

    @property
    def is_connected(self) -> bool:
        return self.arm.is_connected and all(c.is_connected for c in self._cameras.values())

    def connect(self) -> None:
        self._guard = None
        self.arm.connect()
        connect_cameras(self._cameras, self._sizes, release=self.disconnect)

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [self.arm]

    def reset(self) -> None:
        if self._guard is not None:
            self._guard.begin_episode()

    @property
    def episode_over(self) -> bool:
        return False

    def get_observation(self) -> dict[str, Any]:
        state = self.arm.states() if self._full_state else self.arm.positions()
        observation: dict[str, Any] = {STATE_KEY: state}
        return {**observation, **read_cameras(self._cameras)}

    def send_action(self, action: np.ndarray) -> np.ndarray:
        guard = self._action_guard()
        present = self.arm.positions() if self._max_step is not None else None
        decision = guard(action, present=present)
        if decision.held:
            self._report_hold(decision)
        goals = decision.values
        if goals is None:  # nothing commanded yet: hold where the joints are
            present = self.arm.positions() if present is None else present
            goals = guard.hold_at(present)
            if goals is None:
                return np.asarray(present, dtype=np.float32)
        self.arm.write_goals(goals)
        return goals

    def _action_guard(self) -> ActionGuard:
        if self._guard is None:
            self._guard = ActionGuard(self._action_limits(), max_step=self._max_step)
        return self._guard

    def _action_limits(self) -> ActionLimits:
        calibration = self.arm.bus.calibration
        if calibration is None or not self.arm.is_calibrated:
            raise CalibrationError(
                "the arm has no calibration, so it cannot be sent goals",
                where=self.arm.calibration_key.label,
                hint=f"run `rlctl calibrate` for {self.arm.calibration_key.label}",
            )
        lows, highs = [], []
        for motor in self.arm.motor_names:
            if motor in self._limits:
                low, high = self._limits[motor]
            else:
                low, high = calibration[motor].range_min, calibration[motor].range_max
            lows.append(float(low))
            highs.append(float(high))
        return ActionLimits(tuple(self._names), lows, highs)

    def _report_hold(self, decision: GuardDecision) -> None:
        if decision.first_hold:
            log.warning(
                "action refused, holding the last safe command",
                robot=self.robot_type,
                reason=decision.reason,
                note="said once per episode; every refused action is held the same way",
            )

    def disconnect(self) -> None:
        errors: list[BaseException] = []
        if self.arm.is_connected:
            try:
                self.arm.disconnect(disable_torque=self._torque_off_on_disconnect)
            except Exception as error:  # the cameras must still be released
                errors.append(error)
        for camera in self._cameras.values():
            camera.disconnect()
        if errors:
            raise errors[0]


def openarm_motors(config: OpenArmConfig) -> tuple[dict[str, Motor], dict[str, int]]:
    """The motor table and receive ids a config describes."""
    motors: dict[str, Motor] = {}
    recv_ids: dict[str, int] = {}
    for name, (send_id, recv_id, model) in config.motor_config.items():
        motors[name] = Motor(send_id, model, MotorNormMode.DEGREES)
        recv_ids[name] = recv_id
    return motors, recv_ids


def openarm_gains(config: OpenArmConfig) -> dict[str, tuple[float, float]]:
    names = list(config.motor_config)
    for field in ("position_kp", "position_kd"):
        values = getattr(config, field)
        if len(values) != len(names):
            raise ConfigError(
                f"{field} has {len(values)} values for {len(names)} motors",
                where=f"robot.{field}",
                hint=f"give one per motor, in motor_config's order: {', '.join(names)}",
            )
    return {
        name: (float(kp), float(kd))
        for name, kp, kd in zip(names, config.position_kp, config.position_kd, strict=True)
    }


def openarm_follower(
    config: OpenArmFollowerConfig,
    *,
    calibration_store: CalibrationStore,
    bus: DamiaoMotorBus | None = None,
    cameras: Mapping[str, Camera] | None = None,
) -> OpenArmFollower:
    bus = bus or openarm_bus(config)
    arm = DamiaoArm(
        bus, config.calibration_key(ROBOT_TYPE), calibration_store, openarm_gains(config)
    )
    sizes = {name: camera.frame_size(name) for name, camera in config.cameras.items()}
    return OpenArmFollower(
        arm,
        cameras if cameras is not None else build_cameras(config.cameras),
        sizes,
        joint_limits=config.effective_joint_limits(),
        max_relative_target=config.max_relative_target,
        use_velocity_and_torque=config.use_velocity_and_torque,
        disable_torque_on_disconnect=config.disable_torque_on_disconnect,
    )


def openarm_bus(config: OpenArmConfig) -> DamiaoMotorBus:
    """The arm's CAN bus as its config describes it (python-can loads here)."""
    motors, recv_ids = openarm_motors(config)
    built = motor_bus(
        "damiao",
        motors,
        port=config.port,
        interface=config.can_interface,
        use_can_fd=config.use_can_fd,
        bitrate=config.can_bitrate,
        data_bitrate=config.can_data_bitrate if config.use_can_fd else None,
        recv_ids=recv_ids,
        timeout_s=config.can_timeout_s,
        retries=config.can_retries,
    )
    return cast("DamiaoMotorBus", built)
