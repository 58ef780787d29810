"""What LeRobot's end-effector teleoperators (`gamepad`, `keyboard_ee`) share: their action.

Three motion deltas, `delta_x`, `delta_y`, `delta_z`, each in -1..1 (a step of the end effector,
scaled by whatever drives it), and with `use_gripper` a gripper command: 0 close, 1 stay, 2
open — LeRobot 0.6.1's names, order and values.
"""

from __future__ import annotations

import enum

import numpy as np

from rlctl.application.ports.robot import ACTION_KEY
from rlctl.application.robot_features import action_feature
from rlctl.domain.features import FeatureSpec

DELTAS = ("delta_x", "delta_y", "delta_z")


class GripperAction(enum.IntEnum):
    CLOSE = 0
    STAY = 1
    OPEN = 2


def end_effector_features(*, use_gripper: bool) -> dict[str, FeatureSpec]:
    names = [*DELTAS, "gripper"] if use_gripper else list(DELTAS)
    return {ACTION_KEY: action_feature(names)}


def end_effector_action(
    deltas: tuple[float, float, float], gripper: GripperAction, *, use_gripper: bool
) -> np.ndarray:
    values = [*deltas, float(gripper)] if use_gripper else list(deltas)
    return np.asarray(values, dtype=np.float32)
