"""`--teleop.type=keyboard_ee`: the keyboard as LeRobot 0.6.1's end-effector teleoperator.

| key (held) | action |
| --- | --- |
| ↑ / ↓ | `delta_y` -1 / +1 |
| ← / → | `delta_x` +1 / -1 |
| left Shift / right Shift | `delta_z` -1 / +1 |
| left Ctrl / right Ctrl | gripper close (0) / open (2); neither: stay (1) |
| `s` / `r` / `q` | episode success / re-record / quit (said by `events`) |

Holding a key is what moves, so key releases must be seen: the keys are read through pynput's
global listener, as LeRobot reads them, which needs a desktop session it can listen to (X11, a
Windows desktop, macOS with input monitoring allowed). A terminal cannot stand in: it reports
neither releases nor Shift or Ctrl pressed alone. Where pynput cannot listen, `connect` says so
(LeRobot warns and then produces no action at all). `KeyEvents` is the seam: tests and embedders
script the keys with `ScriptedKeys`.
"""

from __future__ import annotations

import queue
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from rlctl.adapters.teleop.config import KeyboardEndEffectorTeleopConfig
from rlctl.adapters.teleop.ee_arm import EndEffectorArm
from rlctl.adapters.teleop.end_effector import (
    GripperAction,
    end_effector_action,
    end_effector_features,
)
from rlctl.application.ports.robot import CalibrationStore, CalibrationTarget
from rlctl.domain.errors import HardwareError, NotSupported
from rlctl.domain.features import FeatureSpec

TELEOP_TYPE = "keyboard_ee"
MOVEMENT_KEYS = ("up", "down", "left", "right", "shift", "shift_r", "ctrl_l", "ctrl_r")


class KeyEvents(Protocol):
    """Key presses and releases, named as pynput names them: a character (`"s"`) or a special
    key's name (`"up"`, `"shift"`, `"shift_r"`, `"ctrl_l"`, `"esc"`)."""

    @property
    def is_alive(self) -> bool: ...

    def start(self) -> None: ...

    def drain(self) -> list[tuple[str, bool]]:
        """The (key, pressed) events since the last call, oldest first."""
        ...

    def stop(self) -> None: ...


class ScriptedKeys:
    """Keys pressed and released by a script (tests, demos, a service embedding rlctl)."""

    def __init__(self) -> None:
        self._events: queue.SimpleQueue[tuple[str, bool]] = queue.SimpleQueue()
        self._alive = False

    @property
    def is_alive(self) -> bool:
        return self._alive

    def start(self) -> None:
        self._alive = True

    def press(self, *keys: str) -> None:
        for key in keys:
            self._events.put((key, True))

    def release(self, *keys: str) -> None:
        for key in keys:
            self._events.put((key, False))

    def drain(self) -> list[tuple[str, bool]]:
        events = []
        while not self._events.empty():
            events.append(self._events.get_nowait())
        return events

    def stop(self) -> None:
        self._alive = False


def key_name(key: Any) -> str:
    """pynput's key as a name: its character, else the special key's name."""
    char = getattr(key, "char", None)
    if char is not None:
        return str(char)
    name = getattr(key, "name", None)
    return str(name) if name is not None else str(key)


class PynputKeys:
    """The whole desktop's keyboard through pynput's listener (a thread of its own);
    `teleop_type` is what its errors name."""

    def __init__(self, teleop_type: str = TELEOP_TYPE) -> None:
        self._events: queue.SimpleQueue[tuple[str, bool]] = queue.SimpleQueue()
        self._listener: Any = None
        self._teleop_type = teleop_type

    @property
    def is_alive(self) -> bool:
        return self._listener is not None and bool(self._listener.is_alive())

    def start(self) -> None:
        try:
            from pynput import keyboard
        except ModuleNotFoundError as error:
            if error.name != "pynput":
                raise _cannot_listen(error, self._teleop_type) from error
            raise NotSupported(
                "pynput is not installed",
                where=f"teleop.type={self._teleop_type}",
                hint="install it: pip install 'rlctl[keyboard]'",
            ) from error
        except ImportError as error:  # pynput's way of saying there is no display
            raise _cannot_listen(error, self._teleop_type) from error
        self._listener = keyboard.Listener(
            on_press=lambda key: self._events.put((key_name(key), True)),
            on_release=lambda key: self._events.put((key_name(key), False)),
        )
        self._listener.start()

    def drain(self) -> list[tuple[str, bool]]:
        events = []
        while not self._events.empty():
            events.append(self._events.get_nowait())
        return events

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()


def _cannot_listen(error: BaseException, teleop_type: str) -> HardwareError:
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return HardwareError(
        f"pynput cannot listen to the keyboard here ({first})",
        where=f"teleop.type={teleop_type}",
        hint="run it in a desktop session (X11, a Windows desktop, or macOS with input "
        "monitoring allowed); over SSH, on Wayland or headless use --teleop.type=gamepad or a "
        "leader arm",
    )


class KeyboardEndEffectorTeleop:
    def __init__(
        self, config: KeyboardEndEffectorTeleopConfig, keys: KeyEvents | None = None
    ) -> None:
        self._use_gripper = config.use_gripper
        self._keys: KeyEvents = keys if keys is not None else PynputKeys()
        self._connected = False
        # Every key seen, and whether it is down now; LeRobot's `current_pressed`.
        self._pressed: dict[str, bool] = {}
        self._misc: list[str] = []

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return end_effector_features(use_gripper=self._use_gripper)

    @property
    def is_connected(self) -> bool:
        return self._connected and self._keys.is_alive

    def connect(self) -> None:
        if not self._connected:
            self._keys.start()
            self._connected = True

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
            self._pressed[key] = down
        dx = dy = dz = 0.0
        gripper = GripperAction.STAY
        # LeRobot's reading, in the order the keys were first seen: a later key overrides.
        for key, down in self._pressed.items():
            held = int(down)
            if key == "up":
                dy = -held
            elif key == "down":
                dy = held
            elif key == "left":
                dx = held
            elif key == "right":
                dx = -held
            elif key == "shift":
                dz = -held
            elif key == "shift_r":
                dz = held
            elif key == "ctrl_r":
                gripper = GripperAction(held + 1)
            elif key == "ctrl_l":
                gripper = GripperAction(1 - held)
            elif down:
                self._misc.append(key)
        return end_effector_action(
            (float(dx), float(dy), float(dz)), gripper, use_gripper=self._use_gripper
        )

    def events(self) -> dict[str, bool]:
        """LeRobot's teleop events: a movement key held is an intervention; `s` success, `r`
        re-record, `q` quit. Reading them forgets the keys seen, as LeRobot's does."""
        intervention = any(self._pressed.get(key, False) for key in MOVEMENT_KEYS)
        self._pressed.clear()
        misc, self._misc = self._misc, []
        terminate = success = rerecord = False
        for key in misc:  # in order, as LeRobot reads them: `q` after `s` is no success
            if key == "s":
                success = True
            elif key == "r":
                terminate = rerecord = True
            elif key == "q":
                terminate, success = True, False
        return {
            "is_intervention": intervention,
            "terminate_episode": terminate,
            "success": success,
            "rerecord_episode": rerecord,
        }

    def disconnect(self) -> None:
        if self._connected:
            self._connected = False
            self._keys.stop()


def keyboard_ee(
    config: KeyboardEndEffectorTeleopConfig, *, calibration_store: CalibrationStore | None = None
) -> KeyboardEndEffectorTeleop | EndEffectorArm:
    """The teleoperator; with `urdf_path`, driving the arm's joints by inverse kinematics."""
    teleop = KeyboardEndEffectorTeleop(config)
    return teleop if config.urdf_path is None else EndEffectorArm(teleop, config)
