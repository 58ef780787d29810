"""Teleoperators: sources of actions for a robot, driven by a person or a script.

A leader arm reads its joints; a scripted teleoperator computes the action from the robot's
observation (Meta-World's expert policies) or plays one back (a recorded episode). Actions are
one float32 vector under the `action` feature, whose names must match the robot's.

`EpisodeActions` reads the actions of one recorded episode, for replay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import attrs

from rlctl.application.ports.control import Console
from rlctl.application.ports.robot import CalibrationTarget
from rlctl.domain.features import FeatureSpec

if TYPE_CHECKING:
    import numpy as np


class Teleoperator(Protocol):
    @property
    def teleop_type(self) -> str: ...

    @property
    def action_features(self) -> Mapping[str, FeatureSpec]:
        """`{"action": FeatureSpec(...)}`; readable before `connect`."""
        ...

    @property
    def is_connected(self) -> bool: ...

    def connect(self) -> None: ...

    def calibration_targets(self) -> Sequence[CalibrationTarget]: ...

    def reset(self) -> None:
        """An episode begins: a script starts over; an arm does nothing."""
        ...

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """The next action. `observation` is the robot's latest; arms ignore it."""
        ...

    def disconnect(self) -> None: ...


@runtime_checkable
class ActuatedTeleoperator(Teleoperator, Protocol):
    """A teleoperator whose joints can be driven (a leader arm with motors): before a person
    takes over from a policy, it is brought to where the follower is, so nothing jumps."""

    def enable_torque(self) -> None:
        """Hold the joints (it resists the hand and follows `send_feedback`)."""
        ...

    def disable_torque(self) -> None:
        """Let go: the joints move freely by hand."""
        ...

    def send_feedback(self, action: np.ndarray) -> None:
        """Drive the joints towards `action` (the action's names and units), within their
        calibrated range; torque must be on."""
        ...


@runtime_checkable
class SelfCalibrating(Protocol):
    """A device whose calibration is not a motor bus's ranges (LeRobot's G1 exoskeleton: an
    ellipse fitted to each joint's hall sensors, then its zero pose): `rlctl calibrate` hands it
    the console and it guides the person through its own steps, saving LeRobot's files."""

    def calibrate_with(
        self, console: Console, *, reuse: Literal["ask", "yes", "no"] = "ask"
    ) -> Sequence[str]:
        """Calibrate what is not reused (`reuse` answers the question about a saved
        calibration); return the files written."""
        ...


@attrs.frozen(eq=False)
class RecordedEpisode:
    """The actions of one episode of a dataset, in order, with what is needed to play them."""

    episode_index: int
    fps: int
    actions: np.ndarray  # (frames, action_dim) float32
    names: Sequence[str] | None
    tasks: tuple[str, ...] = ()
    robot_type: str | None = None

    def __len__(self) -> int:
        return int(self.actions.shape[0])


class EpisodeActions(Protocol):
    def read(self, location: str, episode_index: int) -> RecordedEpisode:
        """Raise `DatasetError` / `InvalidInput` naming the dataset and the episode when it is
        missing or has no `action` feature."""
        ...
