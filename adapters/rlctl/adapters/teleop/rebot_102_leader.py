"""`--teleop.type=rebot_102_leader`: Seeed's reBot Arm 102 (StarArm102), seven FashionStar UART
servos moved by hand, read as the action of a reBot B601 follower, as LeRobot 0.6.1's
`RebotArm102Leader` does.

Actions are `shoulder_pan.pos` … `gripper.pos` in degrees: each servo's multi-turn angle,
unwrapped into the 360° window centred on its range (with the direction's sign), times its
direction (the gripper's -6 widens it to the B601's travel), clipped to `joint_ranges`.

Unlike LeRobot's, which logs an emergency-stop warning and keeps sending the last angles, a
servo that stops answering stops the session with an error naming it: a follower must not go on
being driven by stale angles. Calibration is LeRobot's: in the zero pose with the gripper closed
each servo's origin is set, and the file `teleoperators/rebot_102_leader/<id>.json` holds its id
and `joint_ranges` as its range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.motors.fashionstar import FashionStarMotorBus
from rlctl.adapters.robots.bimanual import SIDES, require_bimanual_id, require_two_ports
from rlctl.adapters.teleop.bimanual_leader import BimanualLeader
from rlctl.adapters.teleop.config import BiRebot102LeaderConfig, Rebot102LeaderConfig
from rlctl.application.ports.robot import (
    ACTION_KEY,
    CalibrationKey,
    CalibrationPlan,
    CalibrationStore,
    CalibrationTarget,
)
from rlctl.application.robot_features import action_feature, joint_names
from rlctl.domain.calibration import Calibration, MotorNormMode
from rlctl.domain.errors import CalibrationError, ConfigError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

TELEOP_TYPE = "rebot_102_leader"
ZERO_POSE = "in its zero pose, gripper closed,"


class Rebot102Arm:
    """The leader's servos as a `CalibrationTarget`: the bus and its calibration file."""

    def __init__(
        self,
        bus: FashionStarMotorBus,
        key: CalibrationKey,
        store: CalibrationStore,
        ranges: Mapping[str, tuple[int, int]],
    ) -> None:
        self._bus = bus
        self._key = key
        self._store = store
        self._ranges = dict(ranges)
        self._calibrated = False
        self.motor_names = list(bus.motors)

    @property
    def calibration_key(self) -> CalibrationKey:
        return self._key

    @property
    def bus(self) -> FashionStarMotorBus:
        return self._bus

    @property
    def calibration_plan(self) -> CalibrationPlan:
        return CalibrationPlan(
            zero_pose=ZERO_POSE,
            fixed_ranges=self._ranges,
            ids_set_by="FashionStar's debugging tool",
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
        self._bus.configure_motors()

    def connect(self) -> None:
        self._bus.connect()
        try:
            saved = self._store.load(self._key)
            if saved is not None:
                self._adopt(saved)
            else:
                log.warning("no calibration saved", device=self._key.label)
            self._bus.configure_motors()
        except BaseException:
            self._bus.disconnect(disable_torque=False)
            raise

    def disconnect(self) -> None:
        self._bus.disconnect()

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

    def angles(self) -> dict[str, float]:
        return {k: float(v) for k, v in self._bus.sync_read("Present_Position").items()}


def unwrap(value: float, low: float, high: float) -> float:
    """A multi-turn angle brought into the 360° window centred on (low + high) / 2 (LeRobot's
    `_round_to_valid_range`)."""
    center = (low + high) / 2.0
    return value - round((value - center) / 360.0) * 360.0


class Rebot102Leader:
    def __init__(
        self,
        arm: Rebot102Arm,
        *,
        directions: Mapping[str, int],
        ranges: Mapping[str, tuple[int, int]],
    ) -> None:
        self.arm = arm
        self._directions = dict(directions)
        self._ranges = dict(ranges)

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(joint_names(self.arm.motor_names))}

    @property
    def is_connected(self) -> bool:
        return self.arm.is_connected

    def connect(self) -> None:
        self.arm.connect()

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [self.arm]

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        if not self.arm.is_calibrated:
            raise CalibrationError(
                "the leader has no calibration: its angles have no zero to be read from",
                where=self.arm.calibration_key.label,
                hint=f"run `rlctl calibrate` for {self.arm.calibration_key.label}",
            )
        raw = self.arm.angles()
        action = []
        for name in self.arm.motor_names:
            low, high = self._ranges[name]
            direction = self._directions[name]
            sign = 1.0 if direction >= 0 else -1.0
            position = unwrap(raw[name], low * sign, high * sign) * direction
            action.append(min(max(position, float(low)), float(high)))
        return np.asarray(action, dtype=np.float32)

    def disconnect(self) -> None:
        if self.arm.is_connected:
            self.arm.disconnect()


def _check(config: Rebot102LeaderConfig) -> dict[str, tuple[int, int]]:
    names = list(config.joint_ids)
    for field in ("joint_directions", "joint_ranges"):
        missing = [n for n in names if n not in getattr(config, field)]
        if missing:
            raise ConfigError(
                f"{field} has no entry for {', '.join(missing)}",
                where=f"teleop.{field}",
                hint="give every joint of joint_ids one",
            )
    ranges: dict[str, tuple[int, int]] = {}
    for name in names:
        bounds = list(config.joint_ranges[name])
        if len(bounds) != 2 or bounds[0] > bounds[1]:
            raise ConfigError(
                f"the range of {name!r} is {bounds}",
                where="teleop.joint_ranges",
                hint="give [min, max] in degrees, min <= max",
            )
        if config.joint_directions[name] == 0:
            raise ConfigError(
                f"the direction of {name!r} is 0",
                where="teleop.joint_directions",
                hint="a sign (1 or -1), with a scale if needed (the gripper's -6)",
            )
        ranges[name] = (int(bounds[0]), int(bounds[1]))
    return ranges


def rebot_102_leader(
    config: Rebot102LeaderConfig,
    *,
    calibration_store: CalibrationStore,
    bus: FashionStarMotorBus | None = None,
) -> Rebot102Leader:
    ranges = _check(config)
    motors = {
        name: Motor(servo_id, "fashionstar", MotorNormMode.DEGREES)
        for name, servo_id in config.joint_ids.items()
    }
    bus = bus or FashionStarMotorBus(
        config.port,
        motors,
        baudrate=config.baudrate,
        timeout_s=config.timeout_s,
        retries=config.retries,
    )
    arm = Rebot102Arm(bus, config.calibration_key(TELEOP_TYPE), calibration_store, ranges)
    return Rebot102Leader(arm, directions=config.joint_directions, ranges=ranges)


def bi_rebot_102_leader(
    config: BiRebot102LeaderConfig, *, calibration_store: CalibrationStore
) -> BimanualLeader:
    """Two reBot Arm 102 leaders (LeRobot's `bi_rebot_102_leader`), each on its own port."""
    require_bimanual_id(config.id, "teleop")
    require_two_ports(config.left_arm_config.port, config.right_arm_config.port, "teleop")
    arms = {
        side: rebot_102_leader(config.arm(side), calibration_store=calibration_store)
        for side in SIDES
    }
    return BimanualLeader(arms["left"], arms["right"], teleop_type="bi_rebot_102_leader")
