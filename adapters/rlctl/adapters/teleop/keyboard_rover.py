"""`--teleop.type=keyboard_rover`: a mobile robot (the EarthRover Mini Plus) from keys held, as
LeRobot 0.6.1's `KeyboardRoverTeleop` reads them.

| key (held) | `linear_velocity`, `angular_velocity` |
| --- | --- |
| w / s | +speed / -speed, no turn (w wins over s) |
| a / d | turn left / right, rolling at `turn_assist_ratio` of the speed unless w or s is held |
| q / e | turn left / right on the spot |
| x | stop (over everything) |
| + or = / - | each tick held, `speed_increment` faster / slower (from the next tick) |

a wins over q and e, d over a. The speeds start at `linear_speed` / `angular_speed` and go no
lower than `min_linear_speed` / `min_angular_speed`; unlike LeRobot's, never past 1 (the SDK's
range: the robot's guard would stop the rover). Keys come through pynput's listener (see
`keyboard.py`); ESC and the episode keys are rlctl's record controls, not this teleoperator's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rlctl.adapters.teleop.config import KeyboardRoverTeleopConfig
from rlctl.adapters.teleop.keyboard import KeyEvents, PynputKeys
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import action_feature
from rlctl.domain.errors import HardwareError
from rlctl.domain.features import FeatureSpec

TELEOP_TYPE = "keyboard_rover"
ACTION_NAMES = ("linear_velocity", "angular_velocity")
# rlctl's cap on the speeds: the SDK's commands are -1..1.
TOP_SPEED = 1.0


class RoverKeys:
    """LeRobot's keys-to-velocities mapping for a rover, with its adjustable speeds."""

    def __init__(self, config: KeyboardRoverTeleopConfig) -> None:
        self.config = config
        self.linear_speed = config.linear_speed
        self.angular_speed = config.angular_speed

    def __call__(self, pressed: Iterable[str]) -> tuple[float, float]:
        held = set(pressed)
        config = self.config
        linear = angular = 0.0
        if "w" in held:
            linear = self.linear_speed
        elif "s" in held:
            linear = -self.linear_speed
        if "d" in held or "a" in held:
            angular = -self.angular_speed if "d" in held else self.angular_speed
            if linear == 0:
                linear = self.linear_speed * config.turn_assist_ratio
        elif "q" in held or "e" in held:
            angular = self.angular_speed if "q" in held else -self.angular_speed
            linear = 0.0
        if "x" in held:
            linear = angular = 0.0
        if "+" in held or "=" in held:
            self.linear_speed = min(TOP_SPEED, self.linear_speed + config.speed_increment)
            self.angular_speed = min(
                TOP_SPEED, self.angular_speed + config.speed_increment * config.angular_speed_ratio
            )
        if "-" in held:
            self.linear_speed = max(
                config.min_linear_speed, self.linear_speed - config.speed_increment
            )
            self.angular_speed = max(
                config.min_angular_speed,
                self.angular_speed - config.speed_increment * config.angular_speed_ratio,
            )
        return float(linear), float(angular)


class KeyboardRoverTeleop:
    def __init__(self, config: KeyboardRoverTeleopConfig, keys: KeyEvents | None = None) -> None:
        self.config = config
        self._keys: KeyEvents = keys if keys is not None else PynputKeys(TELEOP_TYPE)
        self._mapping = RoverKeys(config)
        self._held: set[str] = set()
        self._connected = False

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(ACTION_NAMES)}

    @property
    def is_connected(self) -> bool:
        return self._connected and self._keys.is_alive

    def connect(self) -> None:
        if self._connected:
            return
        self._keys.start()
        self._connected = True
        self._held.clear()
        self._mapping = RoverKeys(self.config)

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        if not self.is_connected:
            raise HardwareError(
                "the keyboard listener is not running",
                where=f"teleop.type={TELEOP_TYPE}",
                hint="connect the teleoperator first (the listener stopped or never started)",
            )
        for key, down in self._keys.drain():
            if down:
                self._held.add(key)
            else:
                self._held.discard(key)
        return np.asarray(self._mapping(self._held), dtype=np.float32)

    def disconnect(self) -> None:
        if self._connected:
            self._connected = False
            self._keys.stop()


def keyboard_rover(
    config: KeyboardRoverTeleopConfig,
    *,
    calibration_store: CalibrationStore | None = None,
    keys: KeyEvents | None = None,
) -> KeyboardRoverTeleop:
    """`keys` replaces the desktop's keyboard (tests, embedders: `ScriptedKeys`)."""
    return KeyboardRoverTeleop(config, keys)
