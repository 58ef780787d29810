"""`--teleop.type=homunculus_arm` / `homunculus_glove`: Hugging Face's Homunculus exoskeleton arm
and glove, the leaders of the Hope JR arm and hand, as LeRobot 0.6.1 reads them.

    --teleop.type=homunculus_glove --teleop.port=/dev/ttyACM1 --teleop.side=right --teleop.id=g

Each is an ESP32 board printing one line of space-separated integers per reading over USB serial
(115200 baud). The glove's line holds its 16 joints in order; the arm's holds 21 numbers, of
which LeRobot takes seven (fields 19, 18, 20, 17, 16, 1, 0 for shoulder_pitch, shoulder_yaw,
shoulder_roll, elbow_flex, wrist_roll, wrist_yaw, wrist_pitch).

Calibration (`rlctl calibrate`, saved as `teleoperators/<type>/<id>.json` in LeRobot's format):
the joints are moved through their whole ranges (the glove finger by finger) while the extremes
are kept; ids are the joints' indexes, homing offsets 0, and the glove's joints LeRobot inverts
for its side get drive mode 1.

Actions: the arm's seven joints in -100..100, smoothed by LeRobot's moving average (n=50) —
the Hope JR arm's action. The glove's readings are smoothed (n=10, on the raw values) and
normalized, then become the Hope JR hand's 16 motors through LeRobot's
`homunculus_glove_to_hope_jr_hand`: a finger's radial and ulnar flexors mix its flexion and its
abduction (splay 0.3, the pinky's 0.5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.teleop.config import HomunculusArmConfig, HomunculusGloveConfig
from rlctl.adapters.teleop.serial_joints import SerialJointBus
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import (
    ACTION_KEY,
    CalibrationKey,
    CalibrationPlan,
    CalibrationStore,
    CalibrationTarget,
)
from rlctl.application.robot_features import action_feature, joint_names
from rlctl.domain.calibration import Calibration, MotorNormMode
from rlctl.domain.features import FeatureSpec
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

M100 = MotorNormMode.RANGE_M100_100
P100 = MotorNormMode.RANGE_0_100
FINGERS = ("thumb", "index", "middle", "ring", "pinky")

ARM_JOINTS = (
    "shoulder_pitch",
    "shoulder_yaw",
    "shoulder_roll",
    "elbow_flex",
    "wrist_roll",
    "wrist_yaw",
    "wrist_pitch",
)
ARM_FIELDS = 21  # 16 raw readings + 5 angles
ARM_FIELD_OF_JOINT = {
    "shoulder_pitch": 19,
    "shoulder_yaw": 18,
    "shoulder_roll": 20,
    "elbow_flex": 17,
    "wrist_roll": 16,
    "wrist_yaw": 1,
    "wrist_pitch": 0,
}
ARM_SMOOTHING = 50

GLOVE_JOINTS: dict[str, MotorNormMode] = {
    "thumb_cmc": P100,
    "thumb_mcp": P100,
    "thumb_pip": P100,
    "thumb_dip": P100,
    "index_mcp_abduction": M100,
    "index_mcp_flexion": P100,
    "index_dip": P100,
    "middle_mcp_abduction": M100,
    "middle_mcp_flexion": P100,
    "middle_dip": P100,
    "ring_mcp_abduction": M100,
    "ring_mcp_flexion": P100,
    "ring_dip": P100,
    "pinky_mcp_abduction": M100,
    "pinky_mcp_flexion": P100,
    "pinky_dip": P100,
}
GLOVE_SMOOTHING = 10
# LeRobot's glove joints read in reverse, per side.
GLOVE_INVERSIONS = {
    "left": (
        "thumb_cmc",
        "index_dip",
        "middle_mcp_abduction",
        "middle_dip",
        "pinky_mcp_abduction",
        "pinky_dip",
    ),
    "right": (
        "thumb_mcp",
        "thumb_cmc",
        "thumb_pip",
        "thumb_dip",
        "index_mcp_abduction",
        "middle_mcp_abduction",
        "ring_mcp_abduction",
        "ring_mcp_flexion",
        "pinky_mcp_abduction",
    ),
}

# The Hope JR hand's motors, in its motor table's order, and how much of a finger's abduction
# its two flexors take (LeRobot's joints_translation).
HAND_MOTORS = (
    "thumb_cmc",
    "thumb_mcp",
    "thumb_pip",
    "thumb_dip",
    "index_radial_flexor",
    "index_ulnar_flexor",
    "index_pip_dip",
    "middle_radial_flexor",
    "middle_ulnar_flexor",
    "middle_pip_dip",
    "ring_radial_flexor",
    "ring_ulnar_flexor",
    "ring_pip_dip",
    "pinky_radial_flexor",
    "pinky_ulnar_flexor",
    "pinky_pip_dip",
)
SPLAY = {"index": 0.3, "middle": 0.3, "ring": 0.3, "pinky": 0.5}


def glove_to_hope_jr_hand(glove: Mapping[str, float]) -> dict[str, float]:
    """The Hope JR hand's goals from the glove's normalized joints (LeRobot's
    `homunculus_glove_to_hope_jr_hand`)."""
    hand = {f"thumb_{j}": glove[f"thumb_{j}"] for j in ("cmc", "mcp", "pip", "dip")}
    for finger, splay in SPLAY.items():
        flexion = glove[f"{finger}_mcp_flexion"]
        abduction = glove[f"{finger}_mcp_abduction"]
        hand[f"{finger}_radial_flexor"] = abduction * splay + flexion * (1 - splay)
        hand[f"{finger}_ulnar_flexor"] = -abduction * splay + flexion * (1 - splay)
        hand[f"{finger}_pip_dip"] = glove[f"{finger}_dip"]
    return {motor: hand[motor] for motor in HAND_MOTORS}


def parse_arm_line(tokens: list[str]) -> dict[str, int] | None:
    if len(tokens) != ARM_FIELDS:
        return None
    return {joint: int(tokens[field]) for joint, field in ARM_FIELD_OF_JOINT.items()}


def parse_glove_line(tokens: list[str]) -> dict[str, int] | None:
    if len(tokens) != len(GLOVE_JOINTS):
        return None
    return {joint: int(token) for joint, token in zip(GLOVE_JOINTS, tokens, strict=True)}


def _sensors(modes: Mapping[str, MotorNormMode], model: str) -> dict[str, Motor]:
    # LeRobot numbers the joints from 0 in its calibration file.
    return {name: Motor(i, model, mode) for i, (name, mode) in enumerate(modes.items())}


class JointStream:
    """A board streaming joints as a calibration target: nothing to free or home, the ranges
    recorded as LeRobot does, the calibration kept in LeRobot's file."""

    def __init__(
        self,
        bus: MotorBus,
        key: CalibrationKey,
        store: CalibrationStore,
        plan: CalibrationPlan,
    ) -> None:
        self._bus = bus
        self._key = key
        self._store = store
        self._plan = plan
        self._calibrated = False

    @property
    def calibration_key(self) -> CalibrationKey:
        return self._key

    @property
    def bus(self) -> MotorBus:
        return self._bus

    @property
    def calibration_plan(self) -> CalibrationPlan:
        return self._plan

    @property
    def is_calibrated(self) -> bool:
        return self._calibrated

    def prepare_calibration(self) -> None:
        self._bus.reset_calibration()

    def apply_calibration(self, calibration: Calibration) -> None:
        self._bus.write_calibration(calibration)
        self._calibrated = True

    @property
    def is_connected(self) -> bool:
        return self._bus.is_connected

    def connect(self) -> None:
        self._bus.connect()
        try:
            saved = self._store.load(self._key)
            if saved is None:
                log.warning("no calibration saved", device=self._key.label)
            else:
                self.apply_calibration(saved)
        except BaseException:
            self._bus.disconnect()
            raise

    def disconnect(self) -> None:
        self._bus.disconnect()


class HomunculusLeader:
    """A Homunculus board as a `Teleoperator`."""

    def __init__(self, stream: JointStream, *, teleop_type: str, action_names: Sequence[str]):
        self.stream = stream
        self._type = teleop_type
        self._names = joint_names(action_names)

    @property
    def teleop_type(self) -> str:
        return self._type

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self._names)}

    @property
    def is_connected(self) -> bool:
        return self.stream.is_connected

    def connect(self) -> None:
        self.stream.connect()

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return [self.stream]

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        values = self._joints(self.stream.bus.sync_read("Present_Position"))
        return np.asarray([values[n.removesuffix(".pos")] for n in self._names], np.float32)

    def _joints(self, normalized: Mapping[str, float]) -> Mapping[str, float]:
        return normalized

    def disconnect(self) -> None:
        self.stream.disconnect()


class HomunculusArm(HomunculusLeader):
    """Its normalized joints, smoothed by LeRobot's moving average (n=50)."""

    def __init__(self, stream: JointStream) -> None:
        super().__init__(stream, teleop_type="homunculus_arm", action_names=ARM_JOINTS)
        self._alpha = 2 / (ARM_SMOOTHING + 1)
        self._ema: dict[str, float] = {}

    def connect(self) -> None:
        self._ema = {}
        super().connect()

    def _joints(self, normalized: Mapping[str, float]) -> Mapping[str, float]:
        for joint, value in normalized.items():
            previous = self._ema.get(joint)
            self._ema[joint] = (
                value if previous is None else self._alpha * value + (1 - self._alpha) * previous
            )
        return self._ema


class HomunculusGlove(HomunculusLeader):
    """Its normalized joints as the Hope JR hand's goals."""

    def __init__(self, stream: JointStream) -> None:
        super().__init__(stream, teleop_type="homunculus_glove", action_names=HAND_MOTORS)

    def _joints(self, normalized: Mapping[str, float]) -> Mapping[str, float]:
        return glove_to_hope_jr_hand(normalized)


def homunculus_arm(
    config: HomunculusArmConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
) -> HomunculusArm:
    motors = _sensors(dict.fromkeys(ARM_JOINTS, M100), "homunculus_arm")
    stream = JointStream(
        bus
        or SerialJointBus(
            config.port,
            motors,
            parse_arm_line,
            device="homunculus_arm",
            baudrate=config.baud_rate,
            timeout_s=config.timeout_s,
            first_line_timeout_s=2 * config.timeout_s,
            expected=f"{ARM_FIELDS} integers separated by spaces",
        ),
        config.calibration_key("homunculus_arm"),
        calibration_store,
        CalibrationPlan(keeps_homing=True, resolution=4096),
    )
    return HomunculusArm(stream)


def homunculus_glove(
    config: HomunculusGloveConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
) -> HomunculusGlove:
    motors = _sensors(GLOVE_JOINTS, "homunculus_glove")
    inverted = GLOVE_INVERSIONS[config.side]
    stream = JointStream(
        bus
        or SerialJointBus(
            config.port,
            motors,
            parse_glove_line,
            device="homunculus_glove",
            baudrate=config.baud_rate,
            timeout_s=config.timeout_s,
            first_line_timeout_s=2 * config.timeout_s,
            smoothing=GLOVE_SMOOTHING,
            expected=f"{len(GLOVE_JOINTS)} integers separated by spaces",
        ),
        config.calibration_key("homunculus_glove"),
        calibration_store,
        CalibrationPlan(
            keeps_homing=True,
            drive_modes={joint: 1 for joint in inverted},
            range_groups=tuple(
                (finger, tuple(j for j in GLOVE_JOINTS if j.startswith(finger)))
                for finger in FINGERS
            ),
        ),
    )
    return HomunculusGlove(stream)
