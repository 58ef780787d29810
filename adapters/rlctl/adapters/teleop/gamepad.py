"""`--teleop.type=gamepad`: a gamepad read through hidapi, LeRobot 0.6.1's mapping.

The first HID device whose product name says Logitech, Xbox, PS4 or PS5 is opened (LeRobot's
rule). Its reports are read as LeRobot reads a Logitech RumblePad 2's: bytes 1-4 the sticks
(left x, left y, right x, right y; 128 at rest), byte 5 the face buttons, byte 6 the shoulder
buttons and triggers. LeRobot's default reads the gamepad through pygame instead; its hidapi
reading (`hidapi_fallback=true`) is the one rlctl has.

| control | action |
| --- | --- |
| left stick forward / back | `delta_x` +1 / -1 |
| left stick left / right | `delta_y` +1 / -1 |
| right stick forward / back | `delta_z` +1 / -1 |
| RT / LT | gripper open (2) / close (0); neither or both: stay (1) |
| RB (held) | intervention (said by `events`) |
| Y / X / A (bits 7, 5, 4 of byte 5) | episode success / failure / re-record (said by `events`) |

Sticks have a dead zone of 0.1. A gamepad that stops answering (unplugged) raises a
`HardwareError` rather than repeating its last deltas, which would keep the robot moving.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from rlctl.adapters.teleop.config import GamepadTeleopConfig
from rlctl.adapters.teleop.ee_arm import EndEffectorArm
from rlctl.adapters.teleop.end_effector import (
    GripperAction,
    end_effector_action,
    end_effector_features,
)
from rlctl.application.ports.robot import CalibrationStore, CalibrationTarget
from rlctl.domain.errors import HardwareError, NotSupported
from rlctl.domain.features import FeatureSpec

TELEOP_TYPE = "gamepad"
KNOWN_PADS = ("Logitech", "Xbox", "PS4", "PS5")
DEADZONE = 0.1
# LeRobot reads ten reports per tick: the device queues them, and the newest one counts.
READS_PER_TICK = 10
REPORT_SIZE = 64


class HidDevice(Protocol):
    """What is used of an opened `hid.device()`."""

    def read(self, max_length: int) -> list[int]: ...

    def close(self) -> None: ...


@attrs.frozen
class PadState:
    """One report, read: stick positions in -1..1 (dead zone applied) and the buttons."""

    left_x: float = 0.0
    left_y: float = 0.0
    right_x: float = 0.0
    right_y: float = 0.0
    intervention: bool = False
    open_gripper: bool = False
    close_gripper: bool = False
    episode_end: str | None = None  # "success", "failure", "rerecord"

    @classmethod
    def parse(cls, data: Sequence[int]) -> PadState | None:
        """A Logitech RumblePad 2 report as LeRobot reads it; None when it is too short."""
        if len(data) < 8:
            return None

        def stick(byte: int) -> float:
            value = (byte - 128) / 128.0
            return 0.0 if abs(value) < DEADZONE else value

        buttons, shoulders = data[5], data[6]
        end = None
        if buttons & 1 << 7:
            end = "success"
        elif buttons & 1 << 5:
            end = "failure"
        elif buttons & 1 << 4:
            end = "rerecord"
        return cls(
            left_y=stick(data[1]),
            left_x=stick(data[2]),
            right_x=stick(data[3]),
            right_y=stick(data[4]),
            intervention=shoulders in (2, 6, 10, 14),
            open_gripper=shoulders in (8, 10, 12),
            close_gripper=shoulders in (4, 6, 12),
            episode_end=end,
        )

    @property
    def deltas(self) -> tuple[float, float, float]:
        return (-self.left_x, -self.left_y, -self.right_y)

    @property
    def gripper(self) -> GripperAction:
        if self.open_gripper == self.close_gripper:
            return GripperAction.STAY
        return GripperAction.OPEN if self.open_gripper else GripperAction.CLOSE


def open_first_gamepad(hid: Any = None) -> HidDevice:
    """Open the first known gamepad through hidapi (`hid`: the module, or a stand-in)."""
    if hid is None:
        try:
            import hid as hidapi
        except ImportError as error:
            raise NotSupported(
                f"hidapi is not installed ({error})",
                where="teleop.type=gamepad",
                hint="install it: pip install 'rlctl[gamepad]'",
            ) from error
        hid = hidapi
    devices = list(hid.enumerate())
    found = [d for d in devices if any(k in (d.get("product_string") or "") for k in KNOWN_PADS)]
    if not found:
        seen = sorted({str(d.get("product_string") or "?") for d in devices})
        raise HardwareError(
            "no gamepad found among the HID devices"
            + (f" ({', '.join(seen)})" if seen else " (none is visible)"),
            where="teleop.type=gamepad",
            hint="connect a Logitech, Xbox, PS4 or PS5 gamepad; on Linux, reading HID devices "
            "may need a udev rule (or root)",
        )
    info = found[0]
    device = hid.device()
    try:
        device.open_path(info["path"])
        device.set_nonblocking(1)
    except OSError as error:
        raise HardwareError(
            f"cannot open the gamepad {info.get('product_string')!r} ({error})",
            where=str(info["path"]),
            hint="close other programs using it; on Linux, reading HID devices may need a udev "
            "rule (or root)",
        ) from error
    return device


class GamepadTeleop:
    def __init__(
        self,
        config: GamepadTeleopConfig,
        open_device: Callable[[], HidDevice] = open_first_gamepad,
    ) -> None:
        """`open_device`: where the reports come from (a fake device in tests)."""
        self._use_gripper = config.use_gripper
        self._open = open_device
        self._device: HidDevice | None = None
        self._state = PadState()

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return end_effector_features(use_gripper=self._use_gripper)

    @property
    def is_connected(self) -> bool:
        return self._device is not None

    def connect(self) -> None:
        if self._device is None:
            self._device = self._open()
            self._state = PadState()

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        state = self._update()
        return end_effector_action(state.deltas, state.gripper, use_gripper=self._use_gripper)

    def events(self) -> dict[str, bool]:
        """LeRobot's teleop events: intervention, episode end (success, failure, re-record)."""
        end = self._state.episode_end
        return {
            "is_intervention": self._state.intervention,
            "terminate_episode": end in ("failure", "rerecord"),
            "success": end == "success",
            "rerecord_episode": end == "rerecord",
        }

    def _update(self) -> PadState:
        device = self._device
        if device is None:
            raise HardwareError("the gamepad is not connected", where="teleop.type=gamepad")
        for _ in range(READS_PER_TICK):
            try:
                data = device.read(REPORT_SIZE)
            except (OSError, ValueError) as error:
                self.disconnect()
                raise HardwareError(
                    f"the gamepad stopped answering ({error})",
                    where="teleop.type=gamepad",
                    hint="check its cable or batteries, then start again",
                ) from error
            parsed = PadState.parse(data) if data else None
            if parsed is not None:
                self._state = parsed
        return self._state

    def disconnect(self) -> None:
        device, self._device = self._device, None
        if device is not None:
            device.close()


def gamepad(
    config: GamepadTeleopConfig, *, calibration_store: CalibrationStore | None = None
) -> GamepadTeleop | EndEffectorArm:
    """The teleoperator; with `urdf_path`, driving the arm's joints by inverse kinematics."""
    teleop = GamepadTeleop(config)
    return teleop if config.urdf_path is None else EndEffectorArm(teleop, config)
