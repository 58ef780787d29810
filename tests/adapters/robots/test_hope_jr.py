"""The Hope JR arm and hand (`hope_jr_arm`, `hope_jr_hand`) on virtual Feetech buses through
the real SDK (the hand's on protocol 1): LeRobot's motor tables, calibration that keeps the
motors' homing and records the ranges (LeRobot's file and place; the hand finger by finger,
its reversed motors per side), the motor settings, the shoulder pitch read on its own, and every
goal through the action guard."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import HopeJrArmConfig, HopeJrHandConfig, RobotConfig
from rlctl.adapters.robots.hope_jr import (
    ARM_JOINTS,
    HAND_MOTORS,
    hope_jr_arm,
    hope_jr_hand,
    hope_jr_hand_motors,
)
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.config import converter
from rlctl.domain.errors import HardwareError, InvalidInput
from rlctl.domain.motors import Motor

pytestmark = pytest.mark.timeout(60)

ARM = {1: "sm8512bl"} | dict.fromkeys(range(2, 8), "sts3250")
OFFSETS = {i: 10 * i for i in ARM}  # what the motors hold before calibrating


@pytest.fixture(autouse=True)
def patient_buses(monkeypatch):
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 250.0)


@pytest.fixture
def virtual():
    bus = VirtualServoBus("feetech", ARM, tau_s=0.01).start()
    for motor in bus.motors:
        motor.set_register("Homing_Offset", OFFSETS[motor.id])
        motor.move_by_hand(2048)
    yield bus
    bus.stop()


@pytest.fixture
def store(tmp_path):
    return CalibrationFiles(tmp_path / "calibration")


def calibrate(virtual, store, robot):
    def move(poll: int) -> None:  # each joint to both ends: raw 1000 .. 3000 past its offset
        motor = virtual.motor((poll - 1) // 2 % 7 + 1)
        motor.move_by_hand((1000 if poll % 2 else 3000) + OFFSETS[motor.id])

    console = ScriptedConsole([], enter_after_polls=15, on_poll=move)
    return CalibrateRobot(store, console, ManualClock())(
        robot.calibration_targets()[0], reuse="no"
    ), console


def test_the_config_is_lerobots():
    config = converter.structure(
        {"type": "hope_jr_arm", "port": "/dev/ttyACM0", "max_relative_target": 5}, RobotConfig
    )
    assert isinstance(config, HopeJrArmConfig) and config.max_relative_target == 5.0


def test_calibration_keeps_the_homing_and_records_the_ranges(virtual, store, tmp_path):
    robot = hope_jr_arm(HopeJrArmConfig(port=virtual.port, id="jr"), calibration_store=store)
    robot.connect()
    try:
        outcome, console = calibrate(virtual, store, robot)
        assert not any("middle of its range" in p for p in console.prompts)
        path = tmp_path / "calibration/robots/hope_jr_arm/jr.json"
        saved = json.loads(path.read_text())
        assert list(saved) == list(ARM_JOINTS)
        assert saved["elbow_flex"] == {
            "id": 4,
            "drive_mode": 0,
            "homing_offset": 40,
            "range_min": 1000,
            "range_max": 3000,
        }
        for motor in virtual.motors:  # the ranges are the motors' limits; homing unchanged
            assert motor.register("Homing_Offset") == OFFSETS[motor.id]
            assert motor.register("Min_Position_Limit") == 1000
            assert motor.register("Max_Position_Limit") == 3000
            # LeRobot's configure: acceleration 30, replies at once, holding.
            assert motor.register("Acceleration") == 30
            assert motor.register("Maximum_Acceleration") == 30
            assert motor.register("Return_Delay_Time") == 0
            assert motor.torque_enabled
        assert outcome.calibration["shoulder_pitch"].id == 1
    finally:
        robot.disconnect()
    assert not any(m.torque_enabled for m in virtual.motors)


def test_goals_pass_the_guard_and_the_shoulder_pitch_is_read_alone(virtual, store, monkeypatch):
    robot = hope_jr_arm(HopeJrArmConfig(port=virtual.port, id="jr"), calibration_store=store)
    robot.connect()
    try:
        calibrate(virtual, store, robot)
        alone: list[str] = []
        original = FeetechMotorBus.read

        def read(self, register, motor, **kwargs):
            alone.append(motor)
            return original(self, register, motor, **kwargs)

        monkeypatch.setattr(FeetechMotorBus, "read", read)
        state = robot.get_observation()["observation.state"]
        assert state.shape == (7,) and alone == ["shoulder_pitch"]
        # -100..100 of the range; a small overshoot (105) is clipped to the range's end.
        goal = np.asarray([50, 0, 0, 105, 0, 0, -100], np.float32)
        sent = robot.send_action(goal)
        assert sent[3] == pytest.approx(100.0) and sent[0] == pytest.approx(50.0)
        goals = {1: 2500, 4: 3000}  # a sync write has no answer: wait for the bus to take it
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and any(
            virtual.motor(i).register("Goal_Position") != g for i, g in goals.items()
        ):
            time.sleep(0.01)
        assert {i: virtual.motor(i).register("Goal_Position") for i in goals} == goals
        for garbage in (np.full(7, np.nan, np.float32), np.full(7, 900.0, np.float32)):
            held = robot.send_action(garbage)  # a NaN or absurd action holds the last goal
            np.testing.assert_allclose(held, sent)
    finally:
        robot.disconnect()


def test_a_saved_calibration_from_lerobot_is_written_to_the_motors_on_connect(
    virtual, store, tmp_path
):
    folder = tmp_path / "calibration/robots/hope_jr_arm"
    folder.mkdir(parents=True)
    calibration = {
        name: {"id": i, "drive_mode": 0, "homing_offset": -5, "range_min": 500, "range_max": 3500}
        for i, name in enumerate(ARM_JOINTS, 1)
    }
    (folder / "jr.json").write_text(json.dumps(calibration))
    robot = hope_jr_arm(HopeJrArmConfig(port=virtual.port, id="jr"), calibration_store=store)
    robot.connect()
    try:
        assert robot.calibration_targets()[0].is_calibrated
        for motor in virtual.motors:
            assert motor.register("Homing_Offset") == -5
            assert motor.register("Max_Position_Limit") == 3500
    finally:
        robot.disconnect()


def test_a_motor_that_stops_answering_is_named(virtual, store, monkeypatch):
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 50.0)
    robot = hope_jr_arm(HopeJrArmConfig(port=virtual.port, id="jr"), calibration_store=store)
    robot.connect()
    try:
        calibrate(virtual, store, robot)
        virtual.unplug(1)
        with pytest.raises(HardwareError, match="'shoulder_pitch' \\(id 1\\)"):
            robot.get_observation()
    finally:
        virtual.plug(1)
        robot.disconnect()


@pytest.fixture
def hand():
    bus = VirtualServoBus.uniform("feetech", "scs0009", range(1, 17), tau_s=0.01).start()
    for motor in bus.motors:
        motor.move_by_hand(512)
    yield bus
    bus.stop()


def calibrate_hand(hand, store, robot):
    def move(poll: int) -> None:  # the finger's motors to both ends of their ranges
        for motor in hand.motors:
            motor.move_by_hand(200 if poll % 2 else 800)

    console = ScriptedConsole([], enter_after_polls=3, on_poll=move)
    target = robot.calibration_targets()[0]
    return CalibrateRobot(store, console, ManualClock())(target, reuse="no"), console


def test_the_hand_calibrates_finger_by_finger_on_protocol_1(hand, store, tmp_path):
    config = HopeJrHandConfig(port=hand.port, side="right", id="jr")
    robot = hope_jr_hand(config, calibration_store=store)
    robot.connect()
    try:
        _, console = calibrate_hand(hand, store, robot)
        fingers = [s.split()[2] for s in console.shown if s.startswith("Move the ")]
        assert fingers == ["thumb", "index", "middle", "ring", "pinky"]
        saved = json.loads((tmp_path / "calibration/robots/hope_jr_hand/jr.json").read_text())
        assert list(saved) == list(HAND_MOTORS)
        assert saved["thumb_mcp"] == {
            "id": 2,
            "drive_mode": 1,
            "homing_offset": 0,
            "range_min": 200,
            "range_max": 800,
        }
        right = {"thumb_mcp", "thumb_dip", "index_ulnar_flexor", "middle_ulnar_flexor"}
        right |= {"ring_ulnar_flexor", "ring_pip_dip", "pinky_ulnar_flexor", "pinky_pip_dip"}
        assert {m for m, c in saved.items() if c["drive_mode"]} == right
        motor = hand.motor(16)
        assert motor.register("Max_Position_Limit") == 800
        assert motor.read_bytes(11, 2) == (800).to_bytes(2, "big")  # protocol 1: big-endian
        assert motor.register("Acceleration") == 254 and motor.torque_enabled
    finally:
        robot.disconnect()


def test_hand_goals_in_0_100_are_mirrored_for_reversed_motors(hand, store):
    robot = hope_jr_hand(
        HopeJrHandConfig(port=hand.port, side="left", id="jr"), calibration_store=store
    )
    robot.connect()
    try:
        calibrate_hand(hand, store, robot)
        state = robot.get_observation()["observation.state"]  # each motor read on its own
        assert state.shape == (16,)
        goal = np.full(16, 25.0, np.float32)
        robot.send_action(goal)
        # thumb_cmc is reversed on a left hand: 25 -> 75 % of 200..800; thumb_pip is not.
        expected = {1: 650, 3: 350}
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and any(
            hand.motor(i).register("Goal_Position") != g for i, g in expected.items()
        ):
            time.sleep(0.01)
        assert {i: hand.motor(i).register("Goal_Position") for i in expected} == expected
    finally:
        robot.disconnect()


def test_protocol_0_and_1_motors_cannot_share_a_bus():
    motors = {"a": Motor(1, "sts3250", "range_m100_100"), "b": Motor(2, "scs0009", "range_0_100")}
    with pytest.raises(InvalidInput, match="different protocols"):
        FeetechMotorBus("/dev/null", motors)


@pytest.mark.slow
def test_a_new_hand_motor_is_found_by_id_and_given_its_own(monkeypatch):
    """Protocol 1 has no broadcast ping: the scan asks every id, as LeRobot's does."""
    # Each id that does not answer costs the margin (the scan asks all of them); 15 ms let a
    # loaded machine's pty miss the found motor's reply.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 50.0)
    fresh = VirtualServoBus.uniform("feetech", "scs0009", [1]).start()  # the factory's id
    try:
        bus = FeetechMotorBus(fresh.port, hope_jr_hand_motors())
        bus.connect(handshake=False)
        try:
            bus.setup_motor("pinky_pip_dip", baudrates=[1_000_000])
            assert bus.ping(16) == 1284 and bus.ping(1) is None  # big-endian model number
        finally:
            bus.disconnect(disable_torque=False)
    finally:
        fresh.stop()
