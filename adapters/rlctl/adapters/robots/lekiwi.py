"""LeKiwi on its own computer (`--robot.type=lekiwi`, what `rlctl lekiwi-host` drives): a SO arm
and a three-omniwheel base, nine Feetech STS3215 on one bus, as LeRobot 0.6.1's `LeKiwi`.

The state and the action are LeRobot's: the arm's six positions (`arm_shoulder_pan.pos`, …) then
the base's body velocities `x.vel`, `y.vel` (m/s) and `theta.vel` (deg/s). The arm runs in
position mode, the wheels in velocity mode; body and wheel speeds convert with LeRobot's
kinematics (wheels at 240°, 0°, 120° less 90°, radius 5 cm, 12.5 cm from the centre, every wheel
scaled down together past 3000 ticks/s). One calibration file for all nine motors, LeRobot's
(`robots/lekiwi/<id>.json`): the arm homed to half a turn in the middle of its range, the wheels
not homed (offset 0), the wrist roll and the wheels given the whole turn.

Every action passes two guards: the arm's (calibrated ranges, `max_relative_target`) and the
base's (`base_max_linear_m_s`, `base_max_angular_deg_s`). A refused arm action holds the last safe
goals; a refused base action stops the base (holding a velocity would keep it driving).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.cameras.config import build_cameras
from rlctl.adapters.cameras.robot_frames import camera_features, connect_cameras, read_cameras
from rlctl.adapters.robots.buses import feetech_bus
from rlctl.adapters.robots.config import LeKiwiConfig
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import (
    ACTION_KEY,
    CalibrationPlan,
    CalibrationStore,
    CalibrationTarget,
)
from rlctl.application.robot_features import (
    STATE_KEY,
    action_feature,
    state_feature,
)
from rlctl.domain.action_guard import ActionGuard, ActionLimits, GuardDecision
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.errors import HardwareError, InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

ROBOT_TYPE = "lekiwi"
ARM_MOTORS = (
    "arm_shoulder_pan",
    "arm_shoulder_lift",
    "arm_elbow_flex",
    "arm_wrist_flex",
    "arm_wrist_roll",
    "arm_gripper",
)
BASE_MOTORS = ("base_left_wheel", "base_back_wheel", "base_right_wheel")
BASE_NAMES = ("x.vel", "y.vel", "theta.vel")
STATE_NAMES = (*(f"{m}.pos" for m in ARM_MOTORS), *BASE_NAMES)
FULL_TURN = ("arm_wrist_roll", *BASE_MOTORS)
# `rlctl setup-motors` as LeRobot's `LeKiwi.setup_motors`: the arm from its gripper, then wheels.
SETUP_ORDER = (*reversed(ARM_MOTORS), *reversed(BASE_MOTORS))
POSITION_MODE = 0
VELOCITY_MODE = 1

STEPS_PER_DEG = 4096.0 / 360.0
WHEEL_RADIUS_M = 0.05
BASE_RADIUS_M = 0.125
MAX_WHEEL_RAW = 3000


def lekiwi_motors(*, use_degrees: bool) -> dict[str, Motor]:
    body = MotorNormMode.DEGREES if use_degrees else MotorNormMode.RANGE_M100_100
    motors = {
        name: Motor(i, "sts3215", MotorNormMode.RANGE_0_100 if name == "arm_gripper" else body)
        for i, name in enumerate(ARM_MOTORS, start=1)
    }
    for i, name in enumerate(BASE_MOTORS, start=7):
        motors[name] = Motor(i, "sts3215", MotorNormMode.RANGE_M100_100)
    return motors


# LeRobot's kinematics, as its LeKiwi computes them.


def _wheel_matrix() -> np.ndarray:
    angles = np.radians(np.array([240, 0, 120]) - 90)
    return np.array([[np.cos(a), np.sin(a), BASE_RADIUS_M] for a in angles])


def _degps_to_raw(degps: float) -> int:
    return int(max(-0x8000, min(0x7FFF, round(degps * STEPS_PER_DEG))))


def body_to_wheel_raw(x: float, y: float, theta: float) -> dict[str, int]:
    """Body velocities (m/s, m/s, deg/s) -> each wheel's Goal_Velocity in ticks per second."""
    velocity = np.array([x, y, theta * (np.pi / 180.0)])
    wheel_degps = _wheel_matrix().dot(velocity) / WHEEL_RADIUS_M * (180.0 / np.pi)
    fastest = max(abs(d) * STEPS_PER_DEG for d in wheel_degps)
    if fastest > MAX_WHEEL_RAW:
        wheel_degps = wheel_degps * (MAX_WHEEL_RAW / fastest)
    raw = [_degps_to_raw(d) for d in wheel_degps]
    return dict(zip(BASE_MOTORS, raw, strict=True))


def wheel_raw_to_body(left: float, back: float, right: float) -> tuple[float, float, float]:
    """Each wheel's Present_Velocity (ticks per second) -> body velocities (m/s, m/s, deg/s)."""
    wheel_radps = np.array([left, back, right]) / STEPS_PER_DEG * (np.pi / 180.0)
    x, y, theta = np.linalg.inv(_wheel_matrix()).dot(wheel_radps * WHEEL_RADIUS_M)
    return float(x), float(y), float(theta * (180.0 / np.pi))


def base_limits(config: Any) -> ActionLimits:
    linear, angular = config.base_max_linear_m_s, config.base_max_angular_deg_s
    return ActionLimits(BASE_NAMES, [-linear, -linear, -angular], [linear, linear, angular])


def arm_step_caps(max_relative_target: Any) -> float | dict[str, float] | None:
    """LeRobot names motors in `max_relative_target`; the guard names action dimensions."""
    if isinstance(max_relative_target, Mapping):
        caps = {str(k).removesuffix(".pos"): v for k, v in max_relative_target.items()}
        if set(caps) != set(ARM_MOTORS):
            raise InvalidInput(
                f"max_relative_target names {', '.join(sorted(caps))}; it needs every arm motor",
                where="robot.max_relative_target",
                hint=f"the arm's motors: {', '.join(ARM_MOTORS)} (the wheels take velocities), "
                "or one number for all",
            )
        return {f"{m}.pos": float(caps[m]) for m in ARM_MOTORS}
    return max_relative_target


class LeKiwi:
    def __init__(
        self,
        config: LeKiwiConfig,
        arm: ServoArm,
        cameras: Mapping[str, Camera],
    ) -> None:
        self.config = config
        self.arm = arm
        self._cameras = dict(cameras)
        self._sizes = {name: camera.frame_size(name) for name, camera in config.cameras.items()}
        self._caps = arm_step_caps(config.max_relative_target)
        self._arm_guard: ActionGuard | None = None
        self._base_guard = ActionGuard(base_limits(config))

    @property
    def robot_type(self) -> str:
        return ROBOT_TYPE

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        features = {STATE_KEY: state_feature(STATE_NAMES)}
        return {**features, **camera_features(self._cameras, self._sizes)}

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(STATE_NAMES)}

    @property
    def realtime(self) -> bool:
        return True

    @property
    def is_connected(self) -> bool:
        return self.arm.is_connected and all(c.is_connected for c in self._cameras.values())

    def connect(self) -> None:
        self._arm_guard = None
        self.arm.connect()
        connect_cameras(self._cameras, self._sizes, release=self.disconnect)

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [self.arm]

    def reset(self) -> None:
        for guard in (self._arm_guard, self._base_guard):
            if guard is not None:
                guard.begin_episode()

    @property
    def episode_over(self) -> bool:
        return False

    def state(self) -> np.ndarray:
        """The arm's positions then the base's body velocities, LeRobot's state order."""
        arm = self.arm.positions(ARM_MOTORS)
        wheels = self.arm.bus.sync_read("Present_Velocity", list(BASE_MOTORS))
        body = wheel_raw_to_body(*(float(wheels[m]) for m in BASE_MOTORS))
        return np.concatenate([arm, np.asarray(body, dtype=np.float32)]).astype(np.float32)

    def get_observation(self) -> dict[str, Any]:
        observation: dict[str, Any] = {STATE_KEY: self.state()}
        return {**observation, **read_cameras(self._cameras)}

    def send_action(self, action: np.ndarray) -> np.ndarray:
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        if values.shape != (len(STATE_NAMES),):
            raise InvalidInput(
                f"a LeKiwi action has {len(STATE_NAMES)} values ({', '.join(STATE_NAMES)}), "
                f"got {values.size}",
                where="lekiwi action",
            )
        arm_guard = self._guard()
        present = self.arm.positions(ARM_MOTORS) if self._caps is not None else None
        arm = arm_guard(values[:6], present=present)
        self._report(arm, "arm")
        goals = arm.values
        if goals is None:
            present = self.arm.positions(ARM_MOTORS) if present is None else present
            goals = arm_guard.hold_at(present)
        if goals is not None:
            self.arm.bus.sync_write(
                "Goal_Position", dict(zip(ARM_MOTORS, (float(v) for v in goals), strict=True))
            )
        else:
            goals = np.asarray(present, dtype=np.float32)
        base = self._base_guard(values[6:])
        self._report(base, "base")
        velocities = (
            np.zeros(3, dtype=np.float32) if base.held or base.values is None else base.values
        )
        self.arm.bus.sync_write("Goal_Velocity", body_to_wheel_raw(*map(float, velocities)))
        return np.concatenate([goals, velocities]).astype(np.float32)

    def stop_base(self) -> None:
        """Every wheel to 0 (what the host's watchdog does when the client goes silent)."""
        self.arm.bus.sync_write("Goal_Velocity", dict.fromkeys(BASE_MOTORS, 0))

    def _guard(self) -> ActionGuard:
        if self._arm_guard is None:
            limits = self.arm.goal_limits(STATE_NAMES)
            arm_limits = ActionLimits(STATE_NAMES[:6], limits.low[:6], limits.high[:6])
            self._arm_guard = ActionGuard(arm_limits, max_step=self._caps)
        return self._arm_guard

    def _report(self, decision: GuardDecision, part: str) -> None:
        if decision.first_hold:
            log.warning(
                "action refused: "
                + ("holding the arm's last safe goals" if part == "arm" else "base stopped"),
                robot=ROBOT_TYPE,
                reason=decision.reason,
                note="said once per episode; every refused action is handled the same way",
            )

    def disconnect(self) -> None:
        errors: list[BaseException] = []
        if self.arm.is_connected:
            try:
                self.stop_base()
            except HardwareError as error:
                log.warning("the base could not be stopped", error=error.message)
            try:
                self.arm.disconnect(disable_torque=self.config.disable_torque_on_disconnect)
            except Exception as error:
                errors.append(error)
        for camera in self._cameras.values():
            camera.disconnect()
        if errors:
            raise errors[0]


def _configure(arm: ServoArm) -> None:
    bus = arm.bus
    bus.disable_torque()
    bus.configure_motors()
    for motor in ARM_MOTORS:
        bus.write("Operating_Mode", motor, POSITION_MODE)
        bus.write("P_Coefficient", motor, 16)
        bus.write("I_Coefficient", motor, 0)
        bus.write("D_Coefficient", motor, 32)
    for motor in BASE_MOTORS:
        bus.write("Operating_Mode", motor, VELOCITY_MODE)
    bus.enable_torque()


def _prepare(arm: ServoArm) -> None:
    for motor in ARM_MOTORS:
        arm.bus.write("Operating_Mode", motor, POSITION_MODE)


def lekiwi(
    config: LeKiwiConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
    cameras: Mapping[str, Camera] | None = None,
) -> LeKiwi:
    motors = lekiwi_motors(use_degrees=config.use_degrees)
    arm = ServoArm(
        bus or feetech_bus(config.port, motors, retries=config.num_read_retries),
        config.calibration_key(ROBOT_TYPE),
        calibration_store,
        CalibrationPlan(
            full_turn_motors=FULL_TURN, setup_order=SETUP_ORDER, unhomed_motors=BASE_MOTORS
        ),
        configure=_configure,
        prepare=_prepare,
    )
    return LeKiwi(config, arm, cameras if cameras is not None else build_cameras(config.cameras))
