"""`keyboard_rover`: keys held become `linear_velocity` / `angular_velocity` as LeRobot 0.6.1's
`KeyboardRoverTeleop` makes them (its own mapping on the same key events, opt-in), scripted keys
drive the emulated EarthRover, and the speeds stay within the SDK's range."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlctl.adapters.robots.config import EarthRoverMiniPlusConfig
from rlctl.adapters.robots.earthrover import earthrover_mini_plus
from rlctl.adapters.teleop.config import KeyboardRoverTeleopConfig, TeleoperatorConfig
from rlctl.adapters.teleop.keyboard import ScriptedKeys
from rlctl.adapters.teleop.keyboard_rover import KeyboardRoverTeleop, keyboard_rover
from rlctl.application.robot_features import check_action_match
from rlctl.domain.config import converter, structure
from rlctl.domain.errors import ConfigError, HardwareError

from ..robots.earthrover_sdk import FakeEarthRoverSdk

pytestmark = pytest.mark.timeout(60)

# (keys pressed, keys released) before each tick, and what LeRobot's mapping gives then.
SEQUENCE = [
    ((), (), (0.0, 0.0)),
    (("w",), (), (1.0, 0.0)),
    (("s",), (), (1.0, 0.0)),  # w wins over s
    ((), ("w",), (-1.0, 0.0)),
    (("d",), ("s",), (0.3, -1.0)),  # turning alone rolls forward at turn_assist_ratio
    (("a",), (), (0.3, -1.0)),  # d wins over a
    (("w",), ("d",), (1.0, 1.0)),
    (("x",), (), (0.0, 0.0)),  # stop over everything
    (("-",), ("x", "w", "a"), (0.0, 0.0)),  # slower from the next tick, each tick held
    (("q",), (), (0.0, 0.94)),
    (("e",), ("-",), (0.0, 0.88)),  # q wins over e
    (("w",), ("q",), (0.0, -0.88)),  # e turns on the spot, w or not
    (("=",), (), (0.0, -0.88)),
    (("+",), ("=",), (0.0, -0.94)),
    ((), (), (0.0, -1.0)),
    ((), ("+", "e"), (1.0, 0.0)),  # never past 1 (rlctl's cap: LeRobot's is 1.1 by now)
    ((), ("w",), (0.0, 0.0)),
    (("S", "W"), (), (0.0, 0.0)),  # upper case (Shift held) is no key of LeRobot's
]
ABOVE_ONE = 15  # the tick where LeRobot's speed is past 1


def run(teleop: KeyboardRoverTeleop, keys: ScriptedKeys) -> list[tuple[float, float]]:
    out = []
    for pressed, released, _ in SEQUENCE:
        keys.press(*pressed)
        keys.release(*released)
        out.append(tuple(float(v) for v in teleop.get_action({})))
    return out


def test_keys_held_become_lerobots_velocities():
    keys = ScriptedKeys()
    teleop = keyboard_rover(KeyboardRoverTeleopConfig(), keys=keys)
    assert teleop.action_features["action"].names == ["linear_velocity", "angular_velocity"]
    with pytest.raises(HardwareError, match="not running"):
        teleop.get_action({})
    teleop.connect()
    try:
        got = run(teleop, keys)
    finally:
        teleop.disconnect()
    assert not teleop.is_connected
    for (pressed, released, expected), action in zip(SEQUENCE, got, strict=True):
        assert action == pytest.approx(expected, abs=1e-6), (pressed, released)
    # Connecting again starts at the configured speeds.
    teleop.connect()
    keys.press("w")
    assert teleop.get_action({}).tolist() == [1.0, 0.0]


LEROBOT_MAPPING = """
import json, sys
from queue import Queue
from lerobot.teleoperators.keyboard import KeyboardRoverTeleop, KeyboardRoverTeleopConfig
# LeRobot's class needs pynput to be built and connected; its mapping does not: build it bare
# and call its get_action undecorated, with the key events in its own queue.
teleop = object.__new__(KeyboardRoverTeleop)
teleop.config = KeyboardRoverTeleopConfig()
teleop.event_queue, teleop.current_pressed, teleop.logs = Queue(), {}, {}
teleop.current_linear_speed = teleop.config.linear_speed
teleop.current_angular_speed = teleop.config.angular_speed
out = []
for pressed, released in json.loads(sys.argv[1]):
    for key in pressed:
        teleop.event_queue.put((key, True))
    for key in released:
        teleop.event_queue.put((key, False))
    action = KeyboardRoverTeleop.get_action.__wrapped__(teleop)
    out.append([action["linear_velocity"], action["angular_velocity"]])
print(json.dumps(out))
"""


@pytest.mark.lerobot
def test_lerobots_rover_mapping_gives_the_same_velocities(lerobot):
    events = [[list(pressed), list(released)] for pressed, released, _ in SEQUENCE]
    theirs = np.array(lerobot("-c", LEROBOT_MAPPING, json.dumps(events), timeout=120))
    keys = ScriptedKeys()
    teleop = keyboard_rover(KeyboardRoverTeleopConfig(), keys=keys)
    teleop.connect()
    ours = np.array(run(teleop, keys))
    # Equal up to the tick where LeRobot's speeds pass the SDK's 1; then ours stay at 1.
    np.testing.assert_allclose(ours[:ABOVE_ONE], theirs[:ABOVE_ONE], atol=1e-6)
    assert np.abs(theirs[ABOVE_ONE]).max() > 1.0 and np.abs(ours).max() <= 1.0
    np.testing.assert_allclose(ours[ABOVE_ONE + 1 :], theirs[ABOVE_ONE + 1 :], atol=1e-6)


def test_scripted_keys_drive_the_emulated_rover():
    with FakeEarthRoverSdk() as sdk:
        robot = earthrover_mini_plus(EarthRoverMiniPlusConfig(sdk_url=sdk.url))
        keys = ScriptedKeys()
        config = converter.structure(
            {"type": "keyboard_rover", "linear_speed": 0.5}, TeleoperatorConfig
        )
        teleop = keyboard_rover(config, keys=keys)
        check_action_match(robot.action_features, teleop.action_features, what="the teleop")
        robot.connect()
        teleop.connect()
        try:
            keys.press("w", "a")
            sent = robot.send_action(teleop.get_action(robot.get_observation()))
            assert sent.tolist() == [0.5, 1.0]
            assert sdk.last_command() == (0.5, 1.0)
        finally:
            teleop.disconnect()
            robot.disconnect()
        assert sdk.last_command() == (0.0, 0.0)


@pytest.mark.parametrize(
    ("setting", "where"),
    [
        ({"linear_speed": 0}, "teleop.linear_speed"),
        ({"angular_speed": 1.5}, "teleop.angular_speed"),
        ({"speed_increment": float("nan")}, "teleop.speed_increment"),
        ({"turn_assist_ratio": -0.1}, "teleop.turn_assist_ratio"),
        ({"min_linear_speed": float("inf")}, "teleop.min_linear_speed"),
    ],
)
def test_bad_speeds_are_refused_naming_the_key(setting, where):
    with pytest.raises(ConfigError) as caught:
        structure({"type": "keyboard_rover", **setting}, TeleoperatorConfig)
    assert caught.value.where == where
