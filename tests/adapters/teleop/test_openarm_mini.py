"""The OpenArm Mini leader (`openarm_mini`, `bi_openarm_mini`) on virtual Feetech buses through
the real SDK: calibration in LeRobot's place and format, its readings mapped to the OpenArm
follower's action as LeRobot 0.6.1 maps them, a motor that stops answering named, and (opt-in)
LeRobot itself reading the same motors."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scservo_sdk

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.teleop.config import (
    BiOpenArmMiniConfig,
    OpenArmMiniArmConfig,
    OpenArmMiniConfig,
    TeleoperatorConfig,
)
from rlctl.adapters.teleop.openarm_mini import bi_openarm_mini, openarm_mini
from rlctl.application.ports.robot import ACTION_KEY, CalibrationKey
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.config import converter
from rlctl.domain.errors import CalibrationError, ConfigError, RlctlError

pytestmark = pytest.mark.timeout(60)

MOTORS = [f"joint_{i}" for i in range(1, 8)] + ["gripper"]
ACTION = [f"{m}.pos" for m in MOTORS]
# Raw positions per motor id, and a gripper calibrated open below closed (drive mode 1).
RAW = {1: 2500, 2: 1500, 3: 2048, 4: 3000, 5: 1000, 6: 2900, 7: 1200, 8: 1800}
GRIPPER = MotorCalibration(8, 1, 0, 1000, 2600)


@pytest.fixture(autouse=True)
def patient_buses(monkeypatch):
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 250.0)


@pytest.fixture
def virtual():
    started: list[VirtualServoBus] = []

    def start() -> VirtualServoBus:
        bus = VirtualServoBus.uniform("feetech", "sts3215", range(1, 9), tau_s=0.01).start()
        started.append(bus)
        return bus

    yield start
    for bus in started:
        bus.stop()


def mini_calibration() -> Calibration:
    joints = {name: MotorCalibration(i, 0, 0, 0, 4095) for i, name in enumerate(MOTORS[:7], 1)}
    return Calibration({**joints, "gripper": GRIPPER})


def lerobot_action(raw: dict[int, int], side: str | None) -> list[float]:
    """LeRobot 0.6.1's `OpenArmMini.get_action`, written out: degrees about the middle of the
    whole turn, the gripper's 0..100 reversed by its drive mode and scaled to 0..-65 degrees,
    joints 6 and 7 swapped, the side's joints negated."""
    flips = {
        "left": {1, 3, 4, 5, 6, 7},
        "right": {1, 2, 3, 4, 5, 7},
    }.get(side or "", set())
    reading = {i: (raw[i] - 2047.5) * 360 / 4095 for i in range(1, 8)}
    reading = {i: -v if i in flips else v for i, v in reading.items()}
    low, high = GRIPPER.range_min, GRIPPER.range_max
    gripper = 100 - (min(high, max(low, raw[8])) - low) / (high - low) * 100
    return [reading[i] for i in (1, 2, 3, 4, 5)] + [reading[7], reading[6], gripper * -0.65]


def hold(bus: VirtualServoBus, raw: dict[int, int]) -> None:
    for motor_id, ticks in raw.items():
        bus.motor(motor_id).move_by_hand(ticks)


class Hand(ScriptedConsole):
    """Answers every prompt with Enter, closing or opening the gripper as it is asked to."""

    def __init__(self, bus: VirtualServoBus, closed: int, opened: int) -> None:
        super().__init__()
        self._bus, self._closed, self._opened = bus, closed, opened

    def ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if prompt.startswith("CLOSE"):
            self._bus.motor(8).move_by_hand(self._closed)
        elif prompt.startswith("OPEN"):
            self._bus.motor(8).move_by_hand(self._opened)
        return ""


@pytest.mark.parametrize(("closed", "opened", "drive_mode"), [(1500, 2900, 0), (2600, 1100, 1)])
def test_calibration_is_lerobots_hanging_zero_full_turns_and_gripper_ends(
    virtual, tmp_path, closed, opened, drive_mode
):
    bus = virtual()
    hold(bus, dict.fromkeys(range(1, 9), 2048))
    store = CalibrationFiles(tmp_path)
    leader = openarm_mini(OpenArmMiniConfig(port=bus.port, id="mini"), calibration_store=store)
    leader.connect()
    try:
        (arm,) = leader.calibration_targets()
        assert not arm.is_calibrated
        console = Hand(bus, closed, opened)
        outcome = CalibrateRobot(store, console, ManualClock())(arm)
        assert "hanging straight down, with the gripper closed" in console.prompts[0]
        assert arm.is_calibrated
    finally:
        leader.disconnect()
    path = tmp_path / "teleoperators" / "openarm_mini" / "mini.json"
    assert outcome.location == str(path)
    saved = json.loads(path.read_text())
    assert list(saved) == MOTORS
    assert saved["joint_4"] == {
        "id": 4,
        "drive_mode": 0,
        "homing_offset": 1,  # the shaft sat at 2048 and now reads 2047, half a turn
        "range_min": 0,
        "range_max": 4095,
    }
    # The gripper's ends, read after homing (one tick below the shaft).
    low, high = sorted((closed - 1, opened - 1))
    assert saved["gripper"] == {
        "id": 8,
        "drive_mode": drive_mode,
        "homing_offset": 1,
        "range_min": low,
        "range_max": high,
    }
    assert all(bus.motor(i).register("Phase") == 12 for i in range(1, 9))
    assert not any(m.torque_enabled for m in bus.motors)


def test_a_gripper_that_did_not_move_is_refused(virtual, tmp_path):
    bus = virtual()
    store = CalibrationFiles(tmp_path)
    leader = openarm_mini(OpenArmMiniConfig(port=bus.port, id="mini"), calibration_store=store)
    leader.connect()
    try:
        with pytest.raises(CalibrationError, match=r"gripper read \d+ both closed and open"):
            CalibrateRobot(store, Hand(bus, 2000, 2000), ManualClock())(
                leader.calibration_targets()[0]
            )
    finally:
        leader.disconnect()
    assert not (tmp_path / "teleoperators" / "openarm_mini" / "mini.json").exists()


@pytest.mark.parametrize("side", ["left", "right", None])
def test_actions_are_lerobots_mapping_to_the_openarm_follower(virtual, tmp_path, side):
    bus = virtual()
    store = CalibrationFiles(tmp_path)
    store.save(CalibrationKey("teleoperators", "openarm_mini", "mini"), mini_calibration())
    leader = openarm_mini(
        OpenArmMiniConfig(port=bus.port, id="mini", side=side), calibration_store=store
    )
    assert leader.teleop_type == "openarm_mini"
    assert leader.action_features[ACTION_KEY].names == ACTION
    leader.connect()
    try:
        assert leader.calibration_targets()[0].is_calibrated
        assert not any(m.torque_enabled for m in bus.motors)  # moved by hand
        hold(bus, RAW)
        action = leader.get_action({})
    finally:
        leader.disconnect()
    assert action.dtype == np.float32
    np.testing.assert_allclose(action, lerobot_action(RAW, side), atol=1e-4)


def test_a_motor_that_stops_answering_is_named(virtual, tmp_path):
    bus = virtual()
    store = CalibrationFiles(tmp_path)
    store.save(CalibrationKey("teleoperators", "openarm_mini", "mini"), mini_calibration())
    leader = openarm_mini(OpenArmMiniConfig(port=bus.port, id="mini"), calibration_store=store)
    leader.connect()
    try:
        bus.unplug(6)
        with pytest.raises(RlctlError) as caught:
            leader.get_action({})
    finally:
        bus.plug(6)
        leader.disconnect()
    assert "joint_6" in str(caught.value) and bus.port in str(caught.value)


def test_a_bimanual_pair_flips_each_arm_as_its_side(virtual, tmp_path):
    left, right = virtual(), virtual()
    store = CalibrationFiles(tmp_path)
    for side in ("left", "right"):
        store.save(
            CalibrationKey("teleoperators", "openarm_mini", f"duo_{side}"), mini_calibration()
        )
    config = BiOpenArmMiniConfig(
        id="duo",
        # A side given per arm is the bimanual pair's to set, as in LeRobot.
        left_arm_config=OpenArmMiniArmConfig(port=left.port, side="right"),
        right_arm_config=OpenArmMiniArmConfig(port=right.port),
    )
    pair = bi_openarm_mini(config, calibration_store=store)
    assert pair.teleop_type == "bi_openarm_mini"
    names = pair.action_features[ACTION_KEY].names
    assert names == [f"left_{n}" for n in ACTION] + [f"right_{n}" for n in ACTION]
    pair.connect()
    try:
        hold(left, RAW)
        hold(right, RAW)
        action = pair.get_action({})
    finally:
        pair.disconnect()
    expected = lerobot_action(RAW, "left") + lerobot_action(RAW, "right")
    np.testing.assert_allclose(action, expected, atol=1e-4)


def test_configs_parse_by_name_and_refuse_a_wrong_side():
    config = converter.structure(
        {"type": "openarm_mini", "port": "/dev/x", "side": "left", "id": "m"}, TeleoperatorConfig
    )
    assert isinstance(config, OpenArmMiniConfig) and config.side == "left"
    with pytest.raises(ConfigError, match="side must be left, right or unset") as caught:
        OpenArmMiniConfig(port="/dev/x", side="top")
    assert caught.value.where == "teleop.side"
    pair = converter.structure(
        {
            "type": "bi_openarm_mini",
            "left_arm_config": {"port": "/dev/a"},
            "right_arm_config": {"port": "/dev/b"},
        },
        TeleoperatorConfig,
    )
    assert isinstance(pair, BiOpenArmMiniConfig)
    with pytest.raises(ConfigError, match="needs an id"):
        pair.build(CalibrationFiles(Path("/nonexistent")))


LEROBOT_READS = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from lerobot.teleoperators.openarm_mini import OpenArmMini, OpenArmMiniConfig
    port, root, side = sys.argv[1], sys.argv[2], sys.argv[3]
    config = OpenArmMiniConfig(port=port, id="mini", side=side, calibration_dir=Path(root))
    mini = OpenArmMini(config)
    mini.bus.connect()
    mini.configure()
    print(json.dumps(mini.get_action()))
    mini.bus.disconnect()
    """
)


@pytest.mark.lerobot
@pytest.mark.slow
def test_lerobot_reads_the_same_action_from_the_same_motors(virtual, tmp_path):
    python = os.environ.get("RLCTL_LEROBOT_PYTHON")
    if not python:
        pytest.skip("set RLCTL_LEROBOT_PYTHON to a Python with lerobot==0.6.1")
    bus = virtual()
    store = CalibrationFiles(tmp_path)
    key = CalibrationKey("teleoperators", "openarm_mini", "mini")
    path = Path(store.save(key, mini_calibration()))
    hold(bus, RAW)
    leader = openarm_mini(
        OpenArmMiniConfig(port=bus.port, id="mini", side="right"), calibration_store=store
    )
    leader.connect()
    try:
        ours = leader.get_action({})
    finally:
        leader.disconnect()
    # What LeRobot's environment may lack: the Feetech SDK (ours, linked) and deepdiff.
    shim = tmp_path / "lerobot_path"
    shim.mkdir()
    site = Path(scservo_sdk.__file__).parent.parent
    for pattern in ("scservo_sdk", "serial", "feetech_servo_sdk-*.dist-info", "pyserial-*"):
        for found in site.glob(pattern):
            (shim / found.name).symlink_to(found)
    extra = os.environ.get("RLCTL_LEROBOT_EXTRA_PATH", "/tmp/lerobot-extra")
    paths = [p for p in (str(shim), extra, os.environ.get("PYTHONPATH")) if p]
    result = subprocess.run(
        [
            python,
            "-c",
            LEROBOT_READS,
            bus.port,
            str(path.parent),
            "right",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(theirs) == sorted(ACTION)
    np.testing.assert_allclose(ours, [theirs[name] for name in ACTION], atol=1e-4)
