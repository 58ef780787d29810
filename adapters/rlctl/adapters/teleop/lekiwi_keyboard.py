"""`--teleop.type=lekiwi_keyboard`: LeKiwi's arm from an SO leader arm, its base from the keyboard.

What LeRobot 0.6.1's `examples/lekiwi/teleoperate.py` puts together by hand: the leader's joints
become `arm_<joint>.pos`, and the keys held become the base's `x.vel` (m/s), `y.vel` (m/s) and
`theta.vel` (deg/s) through LeKiwi's `_from_keyboard_to_base_action`:

| key (held) | base |
| --- | --- |
| w / s | forward / backward at the speed level's `xy` |
| a / d | left / right |
| z / x | turn left / right at the level's `theta` |
| r / f | one level faster / slower per tick held (0.1, 0.2, 0.3 m/s; 30, 60, 90 deg/s) |

Opposite keys cancel, and the speed starts slow, as in LeRobot. The keys are LeRobot's
`teleop_keys` (those of the `lekiwi_client` robot it drives, by default). The robot's guard still
bounds what the base is told (`base_max_linear_m_s`, `base_max_angular_deg_s`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rlctl.adapters.robots.lekiwi import STATE_NAMES
from rlctl.adapters.teleop.arm_leader import ArmLeader
from rlctl.adapters.teleop.config import LeKiwiKeyboardConfig
from rlctl.adapters.teleop.keyboard import KeyEvents, PynputKeys
from rlctl.adapters.teleop.so_leader import so_leader
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import action_feature
from rlctl.domain.errors import HardwareError
from rlctl.domain.features import FeatureSpec

TELEOP_TYPE = "lekiwi_keyboard"
# LeRobot's LeKiwiClient.speed_levels: slow, medium, fast.
SPEED_LEVELS = ((0.1, 30.0), (0.2, 60.0), (0.3, 90.0))


class BaseKeys:
    """LeKiwi's keys-to-velocities mapping, with its speed level (starting slow)."""

    def __init__(self, teleop_keys: Mapping[str, str]) -> None:
        self.keys = dict(teleop_keys)
        self.speed_index = 0

    def __call__(self, pressed: Iterable[str]) -> tuple[float, float, float]:
        held = set(pressed)
        keys = self.keys
        if keys["speed_up"] in held:
            self.speed_index = min(self.speed_index + 1, len(SPEED_LEVELS) - 1)
        if keys["speed_down"] in held:
            self.speed_index = max(self.speed_index - 1, 0)
        xy, theta = SPEED_LEVELS[self.speed_index]
        x = xy * ((keys["forward"] in held) - (keys["backward"] in held))
        y = xy * ((keys["left"] in held) - (keys["right"] in held))
        turn = theta * ((keys["rotate_left"] in held) - (keys["rotate_right"] in held))
        return float(x), float(y), float(turn)


class LeKiwiKeyboardTeleop:
    def __init__(self, arm: ArmLeader, keys: KeyEvents, teleop_keys: Mapping[str, str]) -> None:
        self.arm = arm
        self._keys = keys
        self._base = BaseKeys(teleop_keys)
        self._pressed: dict[str, bool] = {}

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(STATE_NAMES)}

    @property
    def is_connected(self) -> bool:
        return self.arm.is_connected and self._keys.is_alive

    def connect(self) -> None:
        self.arm.connect()
        try:
            self._keys.start()
        except BaseException:
            self.arm.disconnect()
            raise
        self._pressed.clear()
        self._base.speed_index = 0

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return self.arm.calibration_targets()

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        if not self._keys.is_alive:
            raise HardwareError(
                "the keyboard listener is not running",
                where=f"teleop.type={TELEOP_TYPE}",
                hint="connect the teleoperator first (the listener stopped or never started)",
            )
        for key, down in self._keys.drain():
            self._pressed[key] = down
        base = self._base(key for key, down in self._pressed.items() if down)
        arm = np.asarray(self.arm.get_action(observation), dtype=np.float32)
        return np.concatenate([arm, np.asarray(base, dtype=np.float32)])

    def disconnect(self) -> None:
        self._keys.stop()
        if self.arm.is_connected:
            self.arm.disconnect()


def lekiwi_keyboard(
    config: LeKiwiKeyboardConfig,
    *,
    calibration_store: CalibrationStore,
    bus: MotorBus | None = None,
    keys: KeyEvents | None = None,
) -> LeKiwiKeyboardTeleop:
    """`bus` and `keys` replace the leader's serial bus and the desktop's keyboard (tests)."""
    arm = so_leader(config, calibration_store=calibration_store, bus=bus)
    return LeKiwiKeyboardTeleop(
        arm, keys if keys is not None else PynputKeys(TELEOP_TYPE), config.teleop_keys
    )
