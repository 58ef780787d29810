"""Calibration, motor setup, teleoperation, replay and port finding against in-memory buses,
scripted people and a manual clock, through the real SO-101 and Koch arm adapters."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.calibration_store import InMemoryCalibrationStore
from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole, ScriptedControls
from rlctl.adapters.memory.dataset_writer import InMemoryDatasetWriter
from rlctl.adapters.memory.episode_actions import InMemoryEpisodeActions
from rlctl.adapters.memory.motor_bus import InMemoryMotorBus
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.memory.teleoperator import ScriptedTeleoperator
from rlctl.adapters.robots.config import SO101FollowerConfig
from rlctl.adapters.robots.so_follower import SO_JOINTS, so_follower, so_motors
from rlctl.adapters.teleop.config import KochLeaderConfig
from rlctl.adapters.teleop.koch_leader import koch_leader, koch_leader_motors
from rlctl.application.control_loop import LOOP_SWITCH_INTERVAL_S
from rlctl.application.devices import connect_devices
from rlctl.application.ports.control import Control
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.application.use_cases.record_episodes import (
    DatasetTarget,
    RecordEpisodes,
    RecordSettings,
)
from rlctl.application.use_cases.replay_episode import ReplayEpisode
from rlctl.application.use_cases.setup_motors import FindPort, SetupMotors
from rlctl.application.use_cases.teleoperate_robot import TeleoperateRobot
from rlctl.domain.errors import CalibrationError, FeatureMismatch, HardwareError


def so101(store, bus=None, **config):
    bus = bus or InMemoryMotorBus(so_motors(use_degrees=True), port="memory://follower")
    return so_follower(
        SO101FollowerConfig(port=bus.port, id="black", **config),
        calibration_store=store,
        bus=bus,
        cameras={},
    ), bus


def sweep(bus, motors, positions):
    """A console poll hook: the person moves `motors` through `positions`, one per poll."""

    def move(poll):
        for motor in motors:
            bus.move_by_hand(motor, positions[min(poll - 1, len(positions) - 1)])

    return move


def test_calibration_records_ranges_saves_them_and_is_reused():
    store = InMemoryCalibrationStore()
    robot, bus = so101(store)
    robot.connect()
    (arm,) = robot.calibration_targets()
    assert not arm.is_calibrated
    with pytest.raises(CalibrationError, match="no calibration"):
        robot.get_observation()

    console = ScriptedConsole(
        [""], enter_after_polls=3, on_poll=sweep(bus, SO_JOINTS, [1000, 3000])
    )
    outcome = CalibrateRobot(store, console, ManualClock())(arm)
    assert not outcome.reused and arm.is_calibrated
    calibration = outcome.calibration
    assert (
        calibration["elbow_flex"].range_min == 1000 and calibration["elbow_flex"].range_max == 3000
    )
    assert (calibration["wrist_roll"].range_min, calibration["wrist_roll"].range_max) == (0, 4095)
    assert calibration["gripper"].homing_offset == 1  # 2048 read as half a turn (2047)
    assert "middle of its range" in console.prompts[0]
    assert console.tables and console.tables[-1][0][0] == "shoulder_pan"
    assert store.saved[arm.calibration_key] == calibration
    assert bus.registers["elbow_flex"]["Torque_Enable"] == 1  # configured again afterwards
    state = robot.get_observation()["observation.state"]
    assert state.shape == (6,) and state.dtype == np.float32

    # A fresh connect adopts the saved calibration without asking.
    again, _ = so101(store)
    again.connect()
    assert again.calibration_targets()[0].is_calibrated

    # `rlctl calibrate` offers the saved one first: Enter reuses it.
    console = ScriptedConsole([""])
    outcome = CalibrateRobot(store, console, ManualClock())(arm)
    assert outcome.reused and "saved calibration" in console.prompts[0]


def test_a_joint_left_still_is_named():
    store = InMemoryCalibrationStore()
    robot, bus = so101(store)
    robot.connect()
    moving = [m for m in SO_JOINTS if m != "elbow_flex"]
    console = ScriptedConsole([""], enter_after_polls=2, on_poll=sweep(bus, moving, [900, 3100]))
    with pytest.raises(CalibrationError, match="elbow_flex"):
        CalibrateRobot(store, console, ManualClock())(robot.calibration_targets()[0])
    assert not store.saved


def test_koch_leader_inverts_its_elbow_and_holds_its_gripper_open():
    store = InMemoryCalibrationStore()
    bus = InMemoryMotorBus(koch_leader_motors(), apply_drive_mode=False)
    leader = koch_leader(
        KochLeaderConfig(port="memory", id="blue"), calibration_store=store, bus=bus
    )
    leader.connect()
    (arm,) = leader.calibration_targets()
    console = ScriptedConsole(
        [""], enter_after_polls=2, on_poll=sweep(bus, list(bus.motors), [1500, 2500])
    )
    calibration = CalibrateRobot(store, console, ManualClock())(arm).calibration
    assert calibration["elbow_flex"].drive_mode == 1
    assert bus.registers["elbow_flex"]["Drive_Mode"] == 1
    assert (calibration["shoulder_pan"].range_min, calibration["shoulder_pan"].range_max) == (
        0,
        4095,
    )
    assert bus.registers["gripper"]["Torque_Enable"] == 1
    assert bus.registers["gripper"]["Operating_Mode"] == 5
    assert ("write", "Goal_Position", ("gripper",)) in bus.calls


def test_connecting_an_uncalibrated_arm_calibrates_it_or_says_how():
    store = InMemoryCalibrationStore()
    robot, _ = so101(store)
    teleop = ScriptedTeleoperator(SO_JOINTS)
    with pytest.raises(CalibrationError) as caught:
        connect_devices(robot, teleop)
    assert "rlctl calibrate --robot.type=... --robot.port=memory://follower" in caught.value.hint
    called = []
    robot, _ = so101(store)
    connect_devices(robot, teleop, calibrate=called.append)
    assert called == [robot.calibration_targets()[0]]


def test_max_relative_target_caps_what_is_sent():
    store = InMemoryCalibrationStore()
    robot, bus = so101(store, max_relative_target=5.0)
    robot.connect()
    console = ScriptedConsole([""], enter_after_polls=2, on_poll=sweep(bus, SO_JOINTS, [0, 4095]))
    calibration = CalibrateRobot(store, console, ManualClock())(
        robot.calibration_targets()[0]
    ).calibration
    for motor in SO_JOINTS:  # mid-range, so that a step of 20 stays inside every range
        middle = (calibration[motor].range_min + calibration[motor].range_max) // 2
        bus.registers[motor]["Present_Position"] = middle
    present = robot.get_observation()["observation.state"]
    sent = robot.send_action(present + 20)
    np.testing.assert_allclose(sent - present, 5.0, atol=1e-4)


def test_setup_motors_goes_from_the_last_motor_to_the_first():
    bus = InMemoryMotorBus(so_motors(use_degrees=True))
    robot, _ = so101(InMemoryCalibrationStore(), bus=bus)
    console = ScriptedConsole([""] * 6)
    done = SetupMotors(console)(robot.calibration_targets()[0])
    assert done == list(reversed(SO_JOINTS))
    assert next(c for c in bus.calls if c[0] == "setup_motor") == (
        "setup_motor",
        "ID",
        ("gripper",),
    )
    assert "'gripper' motor only" in console.prompts[0]
    assert not bus.is_connected


def test_teleoperation_runs_until_told_or_timed_out():
    clock = ManualClock()
    robot, teleop = ScriptedRobot(), ScriptedTeleoperator()
    report = TeleoperateRobot(robot, teleop, clock)(fps=50, duration_s=1.0)
    assert report.ticks == 50 and len(robot.sent) == 50
    assert clock.now() == pytest.approx(49 / 50)
    assert not robot.is_connected and not teleop.is_connected

    controls = ScriptedControls({7: {Control.STOP}})
    report = TeleoperateRobot(ScriptedRobot(), ScriptedTeleoperator(), clock, controls)(fps=50)
    assert report.ticks == 8 and controls.closed


def test_replay_sends_the_recorded_actions_at_the_dataset_rate():
    writer = InMemoryDatasetWriter()
    robot = ScriptedRobot()
    RecordEpisodes(writer, robot, ManualClock(), teleop=ScriptedTeleoperator())(
        DatasetTarget(root=Path("/memory/ds")),
        RecordSettings(fps=20, num_episodes=2, episode_time_s=0.5, reset_time_s=0),
    )
    recorded = np.stack(robot.sent[10:20])

    replayed, clock = ScriptedRobot(), ManualClock()
    report = ReplayEpisode(replayed, InMemoryEpisodeActions(writer=writer), clock)("/memory/ds", 1)
    assert report.frames_sent == 10
    np.testing.assert_allclose(np.stack(replayed.sent), recorded)
    assert clock.now() == pytest.approx(9 / 20)

    other = ScriptedRobot(joints=("a", "b", "c", "d"))
    with pytest.raises(FeatureMismatch, match="episode 1 names its actions"):
        ReplayEpisode(other, InMemoryEpisodeActions(writer=writer), clock)("/memory/ds", 1)


class WatchedRobot(ScriptedRobot):
    """Notes the interpreter's switch interval and frozen objects as actions arrive."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.interpreter: set[tuple[float, bool]] = set()

    def send_action(self, action: np.ndarray) -> np.ndarray:
        self.interpreter.add((sys.getswitchinterval(), gc.get_freeze_count() > 1000))
        return super().send_action(action)


@pytest.mark.parametrize("owns_process", [True, False])
@pytest.mark.parametrize("realtime", [True, False])
def test_teleoperation_and_replay_keep_the_interpreters_pauses_out_of_a_real_time_loop(
    realtime, owns_process
):
    """Only where the command owns its process (`rlctl teleoperate`, `rlctl replay`)."""
    before = sys.getswitchinterval()
    tuned = realtime and owns_process
    during = {(min(before, LOOP_SWITCH_INTERVAL_S), True)} if tuned else {(before, False)}
    robot = WatchedRobot(realtime=realtime)
    TeleoperateRobot(robot, ScriptedTeleoperator(), ManualClock(), owns_process=owns_process)(
        fps=50, duration_s=0.2
    )
    assert robot.interpreter == during
    writer = InMemoryDatasetWriter()
    RecordEpisodes(writer, ScriptedRobot(), ManualClock(), teleop=ScriptedTeleoperator())(
        DatasetTarget(root=Path("/memory/ds")),
        RecordSettings(fps=20, num_episodes=1, episode_time_s=0.2, reset_time_s=0),
    )
    robot = WatchedRobot(realtime=realtime)
    episodes = InMemoryEpisodeActions(writer=writer)
    ReplayEpisode(robot, episodes, ManualClock(), owns_process=owns_process)("/memory/ds", 0)
    assert robot.interpreter == during
    assert sys.getswitchinterval() == before and gc.get_freeze_count() == 0


def test_find_port_names_the_port_that_disappeared():
    listings = iter([["/dev/ttyACM0", "/dev/ttyACM1"], ["/dev/ttyACM0"]])
    console = ScriptedConsole([""])
    assert FindPort(lambda: next(listings), console)() == "/dev/ttyACM1"
    listings = iter([["/dev/ttyACM0"], ["/dev/ttyACM0"]])
    with pytest.raises(HardwareError, match="no port disappeared"):
        FindPort(lambda: next(listings), ScriptedConsole([""]))()
