"""The end-effector teleoperators, `gamepad` (hidapi) and `keyboard_ee` (pynput), with LeRobot
0.6.1's mapping: a fake HID device emitting reports, scripted key events, and the real
libraries where no device is present (a clear error, never a silent teleoperator)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.teleop.config import (
    GamepadTeleopConfig,
    KeyboardEndEffectorTeleopConfig,
    TeleoperatorConfig,
)
from rlctl.adapters.teleop.gamepad import GamepadTeleop, open_first_gamepad
from rlctl.adapters.teleop.keyboard import KeyboardEndEffectorTeleop, PynputKeys, ScriptedKeys
from rlctl.domain.config import converter
from rlctl.domain.errors import HardwareError

REST = [0, 128, 128, 128, 128, 0, 0, 0]


def report(**changes: int) -> list[int]:
    """A RumblePad 2 report: the sticks' axes (0 is left or forward, 255 right or back), the
    face `buttons` and the `shoulders` byte."""
    data = list(REST)
    axes = (("left_side", 1), ("left_fwd", 2), ("right_side", 3), ("right_fwd", 4))
    for name, index in (*axes, ("buttons", 5)):
        if name in changes:
            data[index] = changes[name]
    data[6] = changes.get("shoulders", 0)
    return data


class FakeDevice:
    def __init__(self, reports: list[list[int]]) -> None:
        self.reports = list(reports)
        self.path: bytes | None = None
        self.nonblocking = 0
        self.closed = False
        self.fail: Exception | None = None

    def open_path(self, path: bytes) -> None:
        self.path = path

    def set_nonblocking(self, value: int) -> None:
        self.nonblocking = value

    def read(self, size: int) -> list[int]:
        assert size == 64
        if self.fail is not None:
            raise self.fail
        return self.reports.pop(0) if self.reports else []

    def close(self) -> None:
        self.closed = True


class FakeHid:
    """The `hid` module as the teleoperator uses it: `enumerate()` and `device()`."""

    def __init__(self, products: list[str], device: FakeDevice) -> None:
        self.products = products
        self._device = device

    def enumerate(self) -> list[dict]:
        return [
            {"product_string": name, "path": f"/dev/hidraw{i}".encode()}
            for i, name in enumerate(self.products)
        ]

    def device(self) -> FakeDevice:
        return self._device


def pad(device: FakeDevice, **settings) -> GamepadTeleop:
    fake = FakeHid(["USB Optical Mouse", "Logitech Logitech RumblePad 2 USB"], device)
    teleop = GamepadTeleop(
        GamepadTeleopConfig(**settings), open_device=lambda: open_first_gamepad(fake)
    )
    teleop.connect()
    return teleop


def test_the_gamepad_reads_lerobots_rumblepad_mapping():
    device = FakeDevice([])
    teleop = pad(device)
    assert device.path == b"/dev/hidraw1" and device.nonblocking == 1  # the pad, not the mouse
    assert teleop.action_features["action"].names == ["delta_x", "delta_y", "delta_z", "gripper"]
    np.testing.assert_array_equal(teleop.get_action({}), [0, 0, 0, 1])  # at rest: stay

    def act(*reports):
        device.reports.extend(reports)
        return teleop.get_action({}).tolist()

    # Left stick forward and left, right stick back; the newest of the queued reports counts.
    queued = report(left_side=250), report(left_fwd=0, left_side=0, right_fwd=255)
    assert act(*queued) == [1.0, 1.0, -127 / 128, 1.0]
    assert act() == [1.0, 1.0, -127 / 128, 1.0]  # no new report: the sticks are where they were
    assert act(report(left_fwd=140, left_side=120)) == [0.0, 0.0, 0.0, 1.0]  # the dead zone
    assert act(report(shoulders=8))[3] == 2.0  # RT: open
    assert act(report(shoulders=4))[3] == 0.0  # LT: close
    assert act(report(shoulders=12))[3] == 1.0  # both: stay
    act(report(shoulders=2, buttons=1 << 7))
    assert teleop.events() == {
        "is_intervention": True,
        "terminate_episode": False,
        "success": True,
        "rerecord_episode": False,
    }
    act(report(buttons=1 << 4))
    assert teleop.events()["rerecord_episode"] and teleop.events()["terminate_episode"]
    assert act([1, 2, 3]) == [0.0, 0.0, 0.0, 1.0]  # a short report is ignored
    teleop.disconnect()
    assert device.closed and not teleop.is_connected

    without = pad(FakeDevice([report(right_fwd=0)]), use_gripper=False)
    assert without.action_features["action"].names == ["delta_x", "delta_y", "delta_z"]
    assert without.get_action({}).tolist() == [0.0, 0.0, 1.0]


def test_a_gamepad_unplugged_mid_run_stops_the_run_instead_of_repeating_its_last_deltas():
    device = FakeDevice([report(left_fwd=0)])
    teleop = pad(device)
    assert teleop.get_action({})[0] == 1.0
    device.fail = OSError("read error")
    with pytest.raises(HardwareError, match="the gamepad stopped answering") as caught:
        teleop.get_action({})
    assert caught.value.hint and not teleop.is_connected and device.closed


def test_no_gamepad_is_a_clear_error_naming_what_was_seen():
    fake = FakeHid(["USB Optical Mouse"], FakeDevice([]))
    with pytest.raises(HardwareError, match=r"no gamepad found .*USB Optical Mouse") as caught:
        open_first_gamepad(fake)
    assert "Logitech, Xbox, PS4 or PS5" in caught.value.hint

    class Refused(FakeDevice):
        def open_path(self, path: bytes) -> None:
            raise OSError("open failed")

    fake = FakeHid(["Xbox Wireless Controller"], Refused([]))
    with pytest.raises(HardwareError, match="cannot open the gamepad 'Xbox Wireless"):
        open_first_gamepad(fake)


def test_the_real_hidapi_without_a_gamepad_says_so():
    hid = pytest.importorskip("hid")
    if any(
        k in (d.get("product_string") or "")
        for d in hid.enumerate()
        for k in ("Logitech", "Xbox", "PS4", "PS5")
    ):
        pytest.skip("a gamepad is plugged in")
    teleop = converter.structure(
        {"type": "gamepad", "hidapi_fallback": True}, TeleoperatorConfig
    ).build(CalibrationFiles("/nonexistent"))
    with pytest.raises(HardwareError, match="no gamepad found"):
        teleop.connect()
    assert not teleop.is_connected


def keyboard(**settings) -> tuple[KeyboardEndEffectorTeleop, ScriptedKeys]:
    keys = ScriptedKeys()
    teleop = KeyboardEndEffectorTeleop(KeyboardEndEffectorTeleopConfig(**settings), keys)
    teleop.connect()
    return teleop, keys


def test_the_keyboard_gives_lerobots_end_effector_deltas():
    teleop, keys = keyboard()
    assert teleop.action_features["action"].names == ["delta_x", "delta_y", "delta_z", "gripper"]

    def act():
        return teleop.get_action({}).tolist()

    assert act() == [0.0, 0.0, 0.0, 1.0]
    keys.press("up")
    assert act() == [0.0, -1.0, 0.0, 1.0]
    assert act() == [0.0, -1.0, 0.0, 1.0]  # held: still moving
    keys.press("left", "shift_r")
    assert act() == [1.0, -1.0, 1.0, 1.0]
    keys.release("up", "left", "shift_r")
    keys.press("right", "down", "shift", "ctrl_r")
    assert act() == [-1.0, 1.0, -1.0, 2.0]
    keys.release("ctrl_r")
    keys.press("ctrl_l")
    assert act()[3] == 0.0
    keys.release("right", "down", "shift", "ctrl_l")
    assert act() == [0.0, 0.0, 0.0, 1.0]

    keys.press("s")
    act()
    assert teleop.events()["success"]
    keys.press("s", "q")
    act()
    events = teleop.events()
    assert events["terminate_episode"] and not events["success"]  # `q` after `s`
    keys.press("up")
    act()
    assert teleop.events()["is_intervention"]
    teleop.disconnect()
    assert not keys.is_alive
    with pytest.raises(HardwareError, match="not running"):
        teleop.get_action({})

    three, keys = keyboard(use_gripper=False)
    keys.press("down")
    assert three.get_action({}).tolist() == [0.0, 1.0, 0.0]


def test_without_a_desktop_pynput_cannot_listen_and_says_so(monkeypatch):
    pytest.importorskip("Xlib")  # pynput's Linux backend is installed
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        pytest.skip("a desktop session is there to listen to")
    monkeypatch.delenv("DISPLAY", raising=False)
    keys = PynputKeys()
    with pytest.raises(HardwareError, match="pynput cannot listen to the keyboard") as caught:
        keys.start()
    assert "gamepad" in caught.value.hint and not keys.is_alive
    teleop = converter.structure({"type": "keyboard_ee"}, TeleoperatorConfig).build(
        CalibrationFiles("/nonexistent")
    )
    with pytest.raises(HardwareError, match="pynput cannot listen"):
        teleop.connect()
    assert not teleop.is_connected
