"""A person's input inside a gym-hil env: the keyboard, a gamepad, or scripted key events.

Each controller answers what gym-hil's `InputsControlWrapper` asks its controllers each step:
`update()`, `get_deltas()`, `should_intervene()`, `gripper_command()`,
`get_episode_end_status()`, and `reset()` at each episode. The keyboard map is gym-hil's
(`KeyboardController`): arrows move in x/y, Shift / right Shift in z, left / right Ctrl close /
open the gripper, space toggles the intervention, Enter ends the episode as a success, Esc as a
failure, `r` asks for it to be recorded again.

`ScriptedKeys` plays "STEP press|release KEY" events through the same map, step by step, so a
test (or a machine without a desktop) drives an intervention exactly as a person would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlctl.domain.errors import ConfigError, InvalidInput

KEYS = (
    "up",
    "down",
    "left",
    "right",
    "shift",
    "shift_r",
    "ctrl_l",
    "ctrl_r",
    "enter",
    "esc",
    "space",
    "r",
)
# Held keys and the state they drive while held.
HELD = {
    "up": "forward_x",
    "down": "backward_x",
    "left": "forward_y",
    "right": "backward_y",
    "shift": "backward_z",
    "shift_r": "forward_z",
}


def parse_scripted_keys(events: Sequence[str]) -> list[tuple[int, str, str]]:
    """`["0 press space", "3 release up"]` → `[(0, "press", "space"), (3, "release", "up")]`."""
    out = []
    for i, event in enumerate(events):
        parts = str(event).split()
        ok = (
            len(parts) == 3
            and parts[0].isdigit()
            and parts[1] in ("press", "release")
            and parts[2] in KEYS
        )
        if not ok:
            raise ConfigError(
                f"cannot read the scripted key event {event!r}",
                where=f"env.scripted_keys[{i}]",
                hint=f"write 'STEP press|release KEY' with KEY one of {', '.join(KEYS)}",
            )
        out.append((int(parts[0]), parts[1], parts[2]))
    return sorted(out, key=lambda e: e[0])


class KeyState:
    """gym-hil's keyboard controller without its listener: `press` / `release` by key name."""

    def __init__(self, step_size: float = 1.0) -> None:
        self.step_size = step_size
        self.states = dict.fromkeys(
            [*HELD.values(), "success", "failure", "intervention", "rerecord"], False
        )
        self.open_gripper = False
        self.close_gripper = False
        self.episode_end_status: str | None = None

    def press(self, key: str) -> None:
        if key in HELD:
            self.states[HELD[key]] = True
        elif key == "ctrl_r":
            self.open_gripper = True
        elif key == "ctrl_l":
            self.close_gripper = True
        elif key == "enter":
            self.states["success"] = True
            self.episode_end_status = "success"
        elif key == "esc":
            self.states["failure"] = True
            self.episode_end_status = "failure"
        elif key == "space":
            self.states["intervention"] = not self.states["intervention"]
        elif key == "r":
            self.states["rerecord"] = True

    def release(self, key: str) -> None:
        if key in HELD:
            self.states[HELD[key]] = False
        elif key == "ctrl_r":
            self.open_gripper = False
        elif key == "ctrl_l":
            self.close_gripper = False

    # --- what the intervention wrapper asks ---------------------------------------------------

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def update(self) -> None:
        pass

    def get_deltas(self) -> tuple[float, float, float]:
        s, d = self.states, self.step_size
        dx = (d if s["forward_x"] else 0.0) - (d if s["backward_x"] else 0.0)
        dy = (d if s["forward_y"] else 0.0) - (d if s["backward_y"] else 0.0)
        dz = (d if s["forward_z"] else 0.0) - (d if s["backward_z"] else 0.0)
        return dx, dy, dz

    def should_intervene(self) -> bool:
        return self.states["intervention"]

    def gripper_command(self) -> str:
        if self.open_gripper == self.close_gripper:
            return "no-op"
        return "open" if self.open_gripper else "close"

    def get_episode_end_status(self) -> str | None:
        status, self.episode_end_status = self.episode_end_status, None
        return status

    def rerecord_requested(self) -> bool:
        return self.states["rerecord"]

    def reset(self) -> None:
        for key in self.states:
            self.states[key] = False


class ScriptedKeys(KeyState):
    """Key events replayed by step number (counted from the env's creation, across episodes)."""

    def __init__(self, events: Sequence[str]) -> None:
        super().__init__()
        self._events = parse_scripted_keys(events)
        self._next = 0
        self._step = 0

    def update(self) -> None:
        while self._next < len(self._events) and self._events[self._next][0] <= self._step:
            _, kind, key = self._events[self._next]
            self.press(key) if kind == "press" else self.release(key)
            self._next += 1
        self._step += 1


class PynputKeys(KeyState):
    """The desktop's keyboard through pynput's listener, as gym-hil's KeyboardController."""

    def __init__(self) -> None:
        super().__init__()
        self._listener: Any = None

    def start(self) -> None:
        try:
            from pynput import keyboard
        except Exception as error:  # pynput raises ImportError and others without a desktop
            raise InvalidInput(
                f"the keyboard cannot be read here ({str(error).splitlines()[0]})",
                where="env.task",
                hint="run on a desktop session (X11, Windows, macOS with input monitoring "
                "allowed), use the Gamepad or plain task, or --env.input=scripted",
            ) from error
        names = {getattr(keyboard.Key, k): k for k in KEYS if hasattr(keyboard.Key, k)}

        def name_of(key: Any) -> str | None:
            if key in names:
                return names[key]
            char = getattr(key, "char", None)
            return "r" if char == "r" else None

        def on_press(key: Any) -> None:
            name = name_of(key)
            if name is not None:
                self.press(name)

        def on_release(key: Any) -> None:
            name = name_of(key)
            if name is not None:
                self.release(name)

        self._listener = keyboard.Listener(on_press=on_press, on_release=on_release)
        self._listener.start()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None


def gamepad_controller() -> Any:
    """gym-hil's own gamepad controller (pygame; hidapi on macOS), started."""
    import sys

    from gym_hil.wrappers.intervention_utils import GamepadController, GamepadControllerHID

    controller: Any = (
        GamepadControllerHID(1.0, 1.0, 1.0)
        if sys.platform == "darwin"
        else GamepadController(1.0, 1.0, 1.0)
    )
    controller.start()
    if not getattr(controller, "running", True) or (
        sys.platform != "darwin" and controller.joystick is None
    ):
        raise InvalidInput(
            "no gamepad found",
            where="env.task",
            hint="plug a gamepad in, or use the Keyboard or plain task (PandaPickCube-v0)",
        )
    return controller


def make_controller(device: str, scripted_keys: Sequence[str]) -> Any:
    if device == "scripted":
        return ScriptedKeys(scripted_keys)
    if device == "keyboard":
        keys = PynputKeys()
        keys.start()
        return keys
    return gamepad_controller()
