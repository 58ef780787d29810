"""`lekiwi_keyboard`: LeKiwi's arm from an SO leader arm, its base from keys held, as LeRobot
0.6.1's `examples/lekiwi/teleoperate.py` combines them: scripted key events, a virtual leader arm,
and the emulated LeKiwi whose wheels turn while `w` is held; the key mapping equal to LeRobot's
`_from_keyboard_to_base_action` on the same key sequence (opt-in)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import LeKiwiClientConfig, LeKiwiConfig
from rlctl.adapters.robots.lekiwi import ARM_MOTORS, BASE_MOTORS, STATE_NAMES, lekiwi
from rlctl.adapters.robots.so_follower import SO_JOINTS
from rlctl.adapters.teleop.config import LeKiwiKeyboardConfig, TeleoperatorConfig
from rlctl.adapters.teleop.keyboard import ScriptedKeys
from rlctl.adapters.teleop.lekiwi_keyboard import BaseKeys, LeKiwiKeyboardTeleop, lekiwi_keyboard
from rlctl.application.ports.robot import CalibrationKey
from rlctl.application.robot_features import check_action_match
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.config import converter
from rlctl.domain.errors import ConfigError

pytestmark = pytest.mark.timeout(60)
KEYS = LeKiwiKeyboardConfig(port="/dev/null").teleop_keys

# (keys held at this tick, (x.vel, y.vel, theta.vel)) — LeRobot's reading, tick by tick.
SEQUENCE = [
    ((), (0.0, 0.0, 0.0)),
    (("w",), (0.1, 0.0, 0.0)),
    (("w", "s"), (0.0, 0.0, 0.0)),
    (("a", "z"), (0.0, 0.1, 30.0)),
    (("d", "x", "r"), (0.0, -0.2, -60.0)),
    (("r", "w"), (0.3, 0.0, 0.0)),
    (("r", "s"), (-0.3, 0.0, 0.0)),  # already the fastest
    (("f",), (0.0, 0.0, 0.0)),
    (("f", "z"), (0.0, 0.0, 30.0)),
    (("f", "a", "w"), (0.1, 0.1, 0.0)),  # already the slowest
    (("q", "e"), (0.0, 0.0, 0.0)),  # keys of no base role
]


def test_keys_held_become_base_velocities_at_lerobots_speed_levels():
    base = BaseKeys(KEYS)
    for held, expected in SEQUENCE:
        assert base(held) == pytest.approx(expected), held


@pytest.mark.lerobot
def test_lerobots_keyboard_mapping_gives_the_same_velocities(lerobot):
    code = (
        "import json, sys, types, numpy as np\n"
        "from lerobot.robots.lekiwi import LeKiwiClient, LeKiwiClientConfig\n"
        # The client's constructor imports pyzmq, which this mapping never uses.
        "sys.modules.setdefault('zmq', types.ModuleType('zmq'))\n"
        "client = LeKiwiClient(LeKiwiClientConfig(remote_ip='127.0.0.1', id='k'))\n"
        "out = []\n"
        "for held in json.loads(sys.argv[1]):\n"
        "    a = client._from_keyboard_to_base_action(np.array(held))\n"
        "    out.append([a['x.vel'], a['y.vel'], a['theta.vel']])\n"
        "print(json.dumps(out))\n"
    )
    theirs = lerobot("-c", code, json.dumps([list(held) for held, _ in SEQUENCE]), timeout=120)
    base = BaseKeys(KEYS)
    ours = [base(held) for held, _ in SEQUENCE]
    np.testing.assert_allclose(np.array(ours), np.array(theirs), atol=1e-12)


def wait_for(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def full_range(names) -> Calibration:
    return Calibration(
        {name: MotorCalibration(i, 0, 0, 0, 4095) for i, name in enumerate(names, start=1)}
    )


def kiwi_calibration() -> Calibration:
    return Calibration(
        {
            name: MotorCalibration(i, 0, 0, 0 if name in BASE_MOTORS else 1024, 4095)
            for i, name in enumerate((*ARM_MOTORS, *BASE_MOTORS), start=1)
        }
    )


def test_a_leader_arm_and_keys_drive_an_emulated_lekiwi(tmp_path, monkeypatch):
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 500.0)
    store = CalibrationFiles(tmp_path)
    store.save(CalibrationKey("teleoperators", "so_leader", "hand"), full_range(SO_JOINTS))
    store.save(CalibrationKey("robots", "lekiwi", "kiwi"), kiwi_calibration())
    leader_bus = VirtualServoBus.uniform("feetech", "sts3215", range(1, 7)).start()
    kiwi_bus = VirtualServoBus.uniform("feetech", "sts3215", range(1, 10)).start()
    keys = ScriptedKeys()
    config = converter.structure(
        {"type": "lekiwi_keyboard", "port": leader_bus.port, "id": "hand"}, TeleoperatorConfig
    )
    teleop = lekiwi_keyboard(config, calibration_store=store, keys=keys)
    robot = lekiwi(LeKiwiConfig(port=kiwi_bus.port, id="kiwi", cameras={}), calibration_store=store)
    check_action_match(robot.action_features, teleop.action_features, what="the teleoperator")
    assert teleop.action_features["action"].names == list(STATE_NAMES)
    teleop.connect()
    robot.connect()
    try:
        assert teleop.is_connected and not leader_bus.motor(1).torque_enabled
        leader_bus.motor(1).move_by_hand(2048 + 400)  # the shoulder pan, about 35 degrees
        keys.press("w")
        action = teleop.get_action({})
        assert action.dtype == np.float32 and action.shape == (9,)
        assert action[0] == pytest.approx(400 * 360 / 4095, abs=0.2)
        assert action[6:] == pytest.approx([0.1, 0.0, 0.0])
        sent = robot.send_action(action)
        assert sent[6:] == pytest.approx([0.1, 0.0, 0.0])
        assert wait_for(lambda: kiwi_bus.motor(7).spin != 0 and kiwi_bus.motor(9).spin != 0)
        keys.release("w")
        keys.press("z")
        action = teleop.get_action({})
        assert action[6:] == pytest.approx([0.0, 0.0, 30.0])
        keys.release("z")
        stopped = robot.send_action(teleop.get_action({}))
        assert stopped[6:] == pytest.approx([0.0, 0.0, 0.0])
        assert wait_for(lambda: all(kiwi_bus.motor(i).spin == 0 for i in (7, 8, 9)))
    finally:
        robot.disconnect()
        teleop.disconnect()
        leader_bus.stop()
        kiwi_bus.stop()
    assert not teleop.is_connected


def test_the_keys_are_the_robots_when_left_as_they_are_and_must_cover_every_role():
    robot = LeKiwiClientConfig(remote_ip="127.0.0.1", teleop_keys={**KEYS, "forward": "i"})
    paired = LeKiwiKeyboardConfig(port="/dev/ttyACM0").paired_with(robot)
    assert isinstance(paired, LeKiwiKeyboardConfig) and paired.teleop_keys["forward"] == "i"
    own = LeKiwiKeyboardConfig(port="/dev/ttyACM0", teleop_keys={**KEYS, "forward": "k"})
    assert own.paired_with(robot).teleop_keys["forward"] == "k"
    with pytest.raises(ConfigError) as raised:
        LeKiwiKeyboardConfig(port="/dev/ttyACM0", teleop_keys={"forward": "w"})
    assert "no key for backward, left, right" in raised.value.message


def test_a_keyboard_that_cannot_listen_releases_the_leader_arm():
    class NoListener(ScriptedKeys):
        def start(self) -> None:
            raise ConfigError("cannot listen here")

    class Arm:
        is_connected = False

        def connect(self) -> None:
            self.is_connected = True

        def disconnect(self) -> None:
            self.is_connected = False

    arm = Arm()
    teleop = LeKiwiKeyboardTeleop(arm, NoListener(), KEYS)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cannot listen"):
        teleop.connect()
    assert not arm.is_connected
