"""Robots: what the control loops observe and command, and how arms on motor buses are calibrated.

A robot speaks in dataset features (`rlctl.domain.features.FeatureSpec`), as LeRobot's
`hw_to_dataset_features` turns its hardware features into them: joints are one float32 vector
(`observation.state`, names `shoulder_pan.pos`, …), cameras are `observation.images.<name>`
(uint8, height by width by 3), and the action is one float32 vector `action` whose names say which
joint each entry drives. `get_observation` returns one value per observation feature, so a
frame of the dataset is the observation plus the action.

`send_action` returns the action actually sent, which may differ from the one asked for;
recordings store what was sent. Every robot passes what it is asked through the domain's
`rlctl.domain.action_guard.ActionGuard` before anything moves: finite and inside its calibrated
(or configured) limits, a small overshoot clipped, each step capped when `max_relative_target` is
set, and a non-finite or absurd action refused — the last safe command is held instead and the
refusal is said once per episode. No motor is ever written NaN or a bound chosen by accident.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs

from rlctl.application.ports.motors import MotorBus
from rlctl.domain.calibration import Calibration
from rlctl.domain.features import FeatureSpec

if TYPE_CHECKING:
    import numpy as np

ACTION_KEY = "action"


@attrs.frozen
class CalibrationKey:
    """Which calibration file belongs to a device: LeRobot keeps one per kind, type and id
    (`calibration/robots/so_follower/black.json`); `directory` replaces `<kind>/<type>`."""

    kind: Literal["robots", "teleoperators"]
    type: str
    id: str | None
    directory: str | None = None

    @property
    def label(self) -> str:
        return f"{self.type} {self.id}"


@attrs.frozen
class CalibrationPlan:
    """What calibrating an arm involves besides the homing and the recorded ranges.

    `full_turn_motors` turn freely (LeRobot gives them the whole encoder range instead of
    recording one); `drive_modes` are the directions to store per motor (1: inverted).
    `zero_pose` describes the pose the motors' zero is taken in, for motors zeroed rather than
    homed to half a turn (Damiao: "hanging straight down, gripper closed"); `fixed_range` is the
    range every motor gets instead of a recorded one (LeRobot's OpenArm: -90..90 degrees), and
    `fixed_ranges` one per motor (LeRobot's reBot arms: their joint limits).
    `ids_set_by` names the vendor's tool when the motors' ids cannot be set through their bus
    (Damiao's), so `rlctl setup-motors` says so before asking for anything. `setup_order` is the
    order `rlctl setup-motors` goes through the motors when it is not the last to the first
    (LeKiwi's: the arm from its gripper, then the wheels from the right one, as LeRobot goes).
    `factory_calibration` is set for arms that come calibrated from their maker (ROBOTIS's
    OMX): calibrating writes it to the motors and saves it, with nothing to move, and an arm
    connected without a saved calibration is given it on the spot, as LeRobot does.
    `closed_open_motors` get their range from two poses asked for in turn, fully closed then
    fully open (LeRobot's OpenArm Mini gripper), and drive mode 1 when closed reads above open.
    `keeps_homing`: no middle pose and no half-turn homing; the homing offsets are those the
    device holds (LeRobot's Hope JR and Homunculus only record ranges). `range_groups` records
    the ranges group by group, each named in its prompt (a hand's fingers, one at a time).
    `unhomed_motors` are left out of the half-turn homing: their homing offset is 0 (LeRobot's
    LeKiwi wheels, which only take velocities).
    """

    full_turn_motors: tuple[str, ...] = ()
    drive_modes: Mapping[str, int] = attrs.field(factory=dict)
    resolution: int = 4096
    zero_pose: str | None = None
    fixed_range: tuple[int, int] | None = None
    ids_set_by: str | None = None
    setup_order: tuple[str, ...] = ()
    factory_calibration: Calibration | None = None
    closed_open_motors: tuple[str, ...] = ()
    # Per motor, a range that replaces the recorded one (the reBot's: its joint limits).
    fixed_ranges: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)
    keeps_homing: bool = False
    range_groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    unhomed_motors: tuple[str, ...] = ()


class CalibrationTarget(Protocol):
    """One arm on one motor bus, as `CalibrateRobot` and `SetupMotors` see it."""

    @property
    def calibration_key(self) -> CalibrationKey: ...

    @property
    def bus(self) -> MotorBus: ...

    @property
    def calibration_plan(self) -> CalibrationPlan: ...

    @property
    def is_calibrated(self) -> bool:
        """A calibration is loaded (from its file) and the motors hold it."""
        ...

    def prepare_calibration(self) -> None:
        """Torque off, position modes and drive modes set, ready to be moved by hand."""
        ...

    def apply_calibration(self, calibration: Calibration) -> None:
        """Write `calibration` to the motors, use it from now on, and configure the arm again."""
        ...


class CalibrationStore(Protocol):
    """Calibrations kept between runs (LeRobot's JSON files)."""

    def load(self, key: CalibrationKey) -> Calibration | None:
        """The saved calibration, None when there is none; a malformed one raises
        `CalibrationError` naming the file."""
        ...

    def save(self, key: CalibrationKey, calibration: Calibration) -> str:
        """Save it (atomically) and return where it went."""
        ...


class Robot(Protocol):
    @property
    def robot_type(self) -> str:
        """The name written as `robot_type` in a dataset's info.json (`so_follower`)."""
        ...

    @property
    def observation_features(self) -> Mapping[str, FeatureSpec]:
        """Readable before `connect`."""
        ...

    @property
    def action_features(self) -> Mapping[str, FeatureSpec]:
        """`{"action": FeatureSpec(...)}`; readable before `connect`."""
        ...

    @property
    def realtime(self) -> bool:
        """Whether the loop must keep to the wall clock: hardware does; a simulator steps as
        fast as it can, since its time is its own."""
        ...

    @property
    def is_connected(self) -> bool: ...

    def connect(self) -> None:
        """Open buses and cameras, load the saved calibration and configure the motors.

        An arm without a saved calibration still connects; `is_calibrated` then says False on
        its calibration target, and reading positions raises `CalibrationError`.
        """
        ...

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        """The arms to calibrate (none for a simulator)."""
        ...

    def reset(self) -> None:
        """An episode begins: a simulator resets its scene; hardware does nothing (a person
        resets it during the reset phase)."""
        ...

    @property
    def episode_over(self) -> bool:
        """Whether the scene ended the episode (a simulator's success or time limit)."""
        ...

    def get_observation(self) -> dict[str, Any]:
        """One value per observation feature (extra keys, such as a simulator's `task`, may
        follow)."""
        ...

    def send_action(self, action: np.ndarray) -> np.ndarray:
        """Command the robot through its action guard; returns the action actually sent (finite,
        float32; the held command when the action was refused). A wrong number of values is
        an `InvalidInput`."""
        ...

    def disconnect(self) -> None:
        """Release buses and cameras (torque off unless configured otherwise); safe twice."""
        ...
