"""A teleoperator with no hardware: actions from a function of the tick number.

The default script swings every joint on a slow sine, different per joint, so recordings have
motion in them. `reset` starts the script over (a new episode).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from rlctl.adapters.memory.robot import DEFAULT_JOINTS
from rlctl.application.ports.control import Console
from rlctl.application.ports.robot import ACTION_KEY, CalibrationTarget
from rlctl.application.robot_features import action_feature, joint_names
from rlctl.domain.errors import HardwareError
from rlctl.domain.features import FeatureSpec

Script = Callable[[int], Sequence[float]]


def sine_script(n_joints: int, period_ticks: int = 90, amplitude: float = 30.0) -> Script:
    def script(tick: int) -> list[float]:
        return [
            amplitude * math.sin(2 * math.pi * tick / period_ticks + j) for j in range(n_joints)
        ]

    return script


class ScriptedTeleoperator:
    def __init__(
        self,
        joints: Sequence[str] = DEFAULT_JOINTS,
        script: Script | None = None,
        *,
        teleop_type: str = "scripted",
        calibration_targets: Sequence[CalibrationTarget] = (),
    ) -> None:
        self._names = joint_names(joints)
        self._script = script or sine_script(len(self._names))
        self._type = teleop_type
        self._targets = list(calibration_targets)
        self._connected = False
        self._tick = 0
        self.observations_seen: list[Mapping[str, Any]] = []

    @property
    def teleop_type(self) -> str:
        return self._type

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self._names)}

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        self._connected = True

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return list(self._targets)

    def reset(self) -> None:
        self._tick = 0

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        action = np.asarray(self._script(self._tick), dtype=np.float32)
        self._tick += 1
        return action

    def disconnect(self) -> None:
        self._connected = False


class ScriptedLeaderArm(ScriptedTeleoperator):
    """An actuated leader (`ActuatedTeleoperator`): with torque on its joints go where
    `send_feedback` drives them and the script does not move them; with torque off a "hand"
    moves them by the script, starting from where they were let go (the script's values are
    offsets from that point). Everything done to it is kept for assertions."""

    def __init__(
        self, joints: Sequence[str] = DEFAULT_JOINTS, script: Script | None = None
    ) -> None:
        super().__init__(joints, script, teleop_type="scripted_leader")
        self.torque = False
        self.position = np.zeros(len(self._names), dtype=np.float32)
        self._released_at = self.position.copy()
        self.feedback: list[np.ndarray] = []
        self.torque_changes: list[bool] = []

    def enable_torque(self) -> None:
        self.torque = True
        self.torque_changes.append(True)

    def disable_torque(self) -> None:
        self.torque = False
        self.torque_changes.append(False)
        self._released_at = self.position.copy()
        self._tick = 0

    def send_feedback(self, action: np.ndarray) -> None:
        if not self.torque:
            raise HardwareError("feedback sent to a leader with torque off", where=self._type)
        self.position = np.asarray(action, dtype=np.float32).copy()
        self.feedback.append(self.position.copy())

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        if not self.torque:
            offset = np.asarray(self._script(self._tick), dtype=np.float32)
            self._tick += 1
            self.position = self._released_at + offset
        return self.position.copy()


class ScriptedSelfCalibrating(ScriptedTeleoperator):
    """A teleoperator that calibrates itself (`SelfCalibrating`): each of its `parts` is asked
    about, then calibrated by waiting for Enter; the calibrations are kept in `saved`."""

    def __init__(self, parts: Sequence[str] = ("left", "right"), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parts = tuple(parts)
        self.saved: dict[str, int] = {}

    def calibrate_with(
        self, console: Console, *, reuse: Literal["ask", "yes", "no"] = "ask"
    ) -> list[str]:
        written = []
        for part in self.parts:
            if part in self.saved:
                keep = reuse == "yes" or (
                    reuse == "ask" and console.ask(f"reuse {part}? ").strip().lower() != "c"
                )
                if keep:
                    continue
            console.show(f"calibrating {part}: press Enter when done")
            while not console.enter_pressed():
                pass
            self.saved[part] = self.saved.get(part, 0) + 1
            written.append(f"memory:{part}")
        return written
