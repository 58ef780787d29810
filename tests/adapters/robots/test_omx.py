"""ROBOTIS OMX arms (`omx_follower`, `omx_leader`) on virtual Dynamixel buses through the real
SDK: the factory calibration written and saved in LeRobot's place and format on first connect, a
saved one restored, motors set up as LeRobot sets them, a leader driving the follower through the
safety guard, a motor that stops answering named."""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import OmxFollowerConfig, RobotConfig
from rlctl.adapters.robots.omx_follower import OMX_JOINTS, omx_follower
from rlctl.adapters.teleop.config import OmxLeaderConfig, TeleoperatorConfig
from rlctl.adapters.teleop.omx_leader import omx_leader
from rlctl.application.ports.robot import CalibrationKey
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.application.use_cases.setup_motors import SetupMotors
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.config import converter
from rlctl.domain.errors import RlctlError

FOLLOWER = {11: "xl430-w250", 12: "xl430-w250", 13: "xl430-w250"} | dict.fromkeys(
    (14, 15, 16), "xl330-m288"
)
LEADER = dict.fromkeys(range(1, 6), "xl330-m288") | {6: "xl330-m077"}
FACTORY = {"drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095}


@pytest.fixture(autouse=True)
def patient_bus(monkeypatch):
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(DynamixelMotorBus, "default_timeout_margin_ms", 250.0)


@pytest.fixture
def virtual():
    started = []

    def start(models):
        bus = VirtualServoBus("dynamixel", models, tau_s=0.01).start()
        started.append(bus)
        return bus

    yield start
    for bus in started:
        bus.stop()


def test_the_types_are_lerobots_with_its_fields_and_defaults():
    robot = converter.structure(
        {"type": "omx_follower", "port": "/dev/ttyACM0", "id": "x"}, RobotConfig
    )
    assert isinstance(robot, OmxFollowerConfig)
    assert (robot.use_degrees, robot.disable_torque_on_disconnect) == (False, True)
    assert robot.max_relative_target is None and robot.cameras == {}
    teleop = converter.structure({"type": "omx_leader", "port": "/dev/ttyACM1"}, TeleoperatorConfig)
    assert isinstance(teleop, OmxLeaderConfig) and teleop.gripper_open_pos == 60.0


def test_the_follower_writes_and_saves_the_factory_calibration_on_first_connect(virtual, tmp_path):
    bus = virtual(FOLLOWER)
    store = CalibrationFiles(tmp_path)
    robot = omx_follower(OmxFollowerConfig(port=bus.port, id="f"), calibration_store=store)
    assert robot.robot_type == "omx_follower"
    assert robot.action_features["action"].names == [f"{j}.pos" for j in OMX_JOINTS]
    robot.connect()
    try:
        assert robot.calibration_targets()[0].is_calibrated
        modes = [bus.motor(i).register("Operating_Mode") for i in range(11, 17)]
        assert modes == [4, 4, 4, 4, 4, 5]  # extended position; the gripper current-limited
        assert bus.motor(13).register("Position_P_Gain") == 1500
        assert bus.motor(13).register("Position_D_Gain") == 600
        assert all(bus.motor(i).torque_enabled for i in range(11, 17))
        assert [bus.motor(i).register("Max_Position_Limit") for i in range(11, 17)] == [4095] * 6
        state = robot.get_observation()["observation.state"]
        assert state.shape == (6,) and np.all(np.abs(state[:5]) <= 100)
    finally:
        robot.disconnect()
    assert not bus.motor(11).torque_enabled
    path = tmp_path / "robots" / "omx_follower" / "f.json"
    saved = json.loads(path.read_text())
    assert list(saved) == list(OMX_JOINTS)
    assert saved == {name: {"id": i, **FACTORY} for i, name in enumerate(OMX_JOINTS, start=11)}


def test_a_saved_calibration_is_given_to_the_motors_and_kept(virtual, tmp_path):
    bus = virtual(FOLLOWER)
    store = CalibrationFiles(tmp_path)
    key = CalibrationKey("robots", "omx_follower", "f")
    mine = Calibration(
        {n: MotorCalibration(i, 0, 5, 100, 4000) for i, n in enumerate(OMX_JOINTS, start=11)}
    )
    store.save(key, mine)
    robot = omx_follower(OmxFollowerConfig(port=bus.port, id="f"), calibration_store=store)
    robot.connect()
    robot.disconnect()
    assert bus.motor(12).register("Homing_Offset") == 5
    assert bus.motor(12).register("Min_Position_Limit") == 100
    assert store.load(key) == mine  # the file is the user's: never replaced by the factory's


def test_the_leader_gets_lerobots_gripper_and_drives_the_follower_through_the_guard(
    virtual, tmp_path
):
    store = CalibrationFiles(tmp_path)
    follower_bus, leader_bus = virtual(FOLLOWER), virtual(LEADER)
    leader = omx_leader(OmxLeaderConfig(port=leader_bus.port, id="l"), calibration_store=store)
    robot = omx_follower(
        OmxFollowerConfig(port=follower_bus.port, id="f", max_relative_target=5.0),
        calibration_store=store,
    )
    leader.connect()
    robot.connect()
    try:
        saved = json.loads((tmp_path / "teleoperators" / "omx_leader" / "l.json").read_text())
        assert saved["gripper"] == {
            "id": 6,
            "drive_mode": 1,
            "homing_offset": 100,
            "range_min": 0,
            "range_max": 4095,
        }
        assert saved["elbow_flex"] == {"id": 3, **FACTORY}
        gripper = leader_bus.motor(6)
        assert gripper.torque_enabled and not leader_bus.motor(1).torque_enabled
        assert gripper.register("Operating_Mode") == 5 and gripper.register("Drive_Mode") == 1
        assert gripper.register("Current_Limit") == 100 and gripper.register("Goal_Current") == 100
        # Held open at gripper_open_pos 60 of its range (the motor inverts it itself, as
        # LeRobot's Dynamixel bus leaves the drive mode to the firmware).
        assert gripper.register("Goal_Position") == pytest.approx(4095 * 0.6, abs=2)

        leader_bus.motor(2).move_by_hand(2048 + 800)
        action = leader.get_action({})
        assert action.shape == (6,) and action[1] == pytest.approx(800 / 4095 * 200, abs=0.5)
        before = robot.get_observation()["observation.state"]
        sent = robot.send_action(action)
        assert sent[1] == pytest.approx(before[1] + 5.0, abs=0.2)  # one capped step
        refused = robot.send_action(np.full(6, np.nan, dtype=np.float32))
        assert np.all(np.isfinite(refused))
    finally:
        robot.disconnect()
        leader.disconnect()


def test_calibrating_writes_the_factory_calibration_with_nothing_to_move(virtual, tmp_path):
    bus = virtual(FOLLOWER)
    store = CalibrationFiles(tmp_path)
    key = CalibrationKey("robots", "omx_follower", "f")
    store.save(
        key,
        Calibration(
            {n: MotorCalibration(i, 0, 7, 10, 4000) for i, n in enumerate(OMX_JOINTS, start=11)}
        ),
    )
    robot = omx_follower(OmxFollowerConfig(port=bus.port, id="f"), calibration_store=store)
    robot.connect()
    try:
        console = ScriptedConsole([])  # no question may be asked
        outcome = CalibrateRobot(store, console, ManualClock())(
            robot.calibration_targets()[0], reuse="no"
        )
    finally:
        robot.disconnect()
    assert not console.prompts and "factory calibration" in console.shown[0]
    assert outcome.calibration["wrist_roll"] == MotorCalibration(15, 0, 0, 0, 4095)
    assert store.load(key) == outcome.calibration
    assert bus.motor(11).register("Homing_Offset") == 0


def test_a_motor_that_stops_answering_is_named(virtual, tmp_path):
    bus = virtual(FOLLOWER)
    robot = omx_follower(
        OmxFollowerConfig(port=bus.port, id="f"), calibration_store=CalibrationFiles(tmp_path)
    )
    robot.connect()
    try:
        bus.unplug(13)
        with pytest.raises(RlctlError) as caught:
            robot.get_observation()
        assert "'elbow_flex' (id 13) sent no status packet" in str(caught.value)
    finally:
        bus.plug(13)
        robot.disconnect()


def test_a_follower_missing_from_its_port_is_named_before_anything_is_written(
    virtual, tmp_path, monkeypatch
):
    monkeypatch.setattr(DynamixelMotorBus, "default_timeout_margin_ms", 20.0)  # none answer
    bus = virtual(LEADER)  # the leader's bus given as the follower's port
    robot = omx_follower(
        OmxFollowerConfig(port=bus.port, id="f"), calibration_store=CalibrationFiles(tmp_path)
    )
    with pytest.raises(RlctlError) as caught:
        robot.connect()
    assert "no answer from 'shoulder_pan' (id 11)" in str(caught.value)
    assert not (tmp_path / "robots").exists()


def sdk_path(tmp_path: Path) -> str:
    """A folder holding this environment's dynamixel-sdk and pyserial (installed packages and
    their metadata), for LeRobot's Python, which is installed without its `dynamixel` extra;
    then LEROBOT_EXTRA_PATH (where its bus finds deepdiff)."""
    folder = tmp_path / "sdk"
    folder.mkdir()
    for name in ("dynamixel-sdk", "pyserial"):
        dist = importlib.metadata.distribution(name)
        top = dist.read_text("top_level.txt") or ""
        for package in [*top.split(), Path(str(dist._path)).name]:  # type: ignore[attr-defined]
            source = Path(str(dist.locate_file(package)))
            if source.exists():
                (folder / package).symlink_to(source)
    extra = os.environ.get("LEROBOT_EXTRA_PATH", "")
    return os.pathsep.join(p for p in (str(folder), extra) if p)


@pytest.mark.lerobot
@pytest.mark.slow
def test_lerobot_drives_the_arms_rlctl_calibrated_and_rlctl_those_lerobot_did(
    virtual, tmp_path, lerobot
):
    """LeRobot 0.6.1's own OmxFollower / OmxLeader, on its own Dynamixel bus: the arms rlctl
    connected (and so calibrated) are calibrated for it too — same file, same place, the motors
    hold it, the same joints read; fresh arms it calibrates are taken by rlctl as they are."""
    store = CalibrationFiles(tmp_path)
    ours = {"follower": virtual(FOLLOWER), "leader": virtual(LEADER)}
    fresh = {"follower": virtual(FOLLOWER), "leader": virtual(LEADER)}
    robot = omx_follower(
        OmxFollowerConfig(port=ours["follower"].port, id="f"), calibration_store=store
    )
    leader = omx_leader(OmxLeaderConfig(port=ours["leader"].port, id="l"), calibration_store=store)
    robot.connect()
    leader.connect()
    try:
        our_state = robot.get_observation()["observation.state"]
        our_action = leader.get_action({})
    finally:
        robot.disconnect()
        leader.disconnect()
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps(
            {
                "calibrated": {k: bus.port for k, bus in ours.items()},
                "fresh": {k: bus.port for k, bus in fresh.items()},
            }
        )
    )
    env = {**os.environ, "HF_LEROBOT_CALIBRATION": str(tmp_path), "PYTHONPATH": sdk_path(tmp_path)}
    theirs = lerobot(Path(__file__).with_name("lerobot_omx.py"), job, env=env, timeout=300)

    for name, key, read in (
        ("follower", CalibrationKey("robots", "omx_follower", "f"), our_state),
        ("leader", CalibrationKey("teleoperators", "omx_leader", "l"), our_action),
    ):
        device = theirs[name]
        assert device["path"] == str(store.path_for(key))
        assert device["calibration"] == store.load(key).to_data()
        assert device["is_calibrated"]  # the motors hold the file: LeRobot did not recalibrate
        joints = [device["read"][f"{j}.pos"] for j in OMX_JOINTS[:5]]  # the gripper may move
        assert joints == pytest.approx(read[:5].tolist(), abs=0.1)

    # Arms LeRobot calibrated first: rlctl loads its files and the motors already hold them.
    for name, key, build in (
        ("fresh_follower", CalibrationKey("robots", "omx_follower", "g"), omx_follower),
        ("fresh_leader", CalibrationKey("teleoperators", "omx_leader", "m"), omx_leader),
    ):
        device = theirs[name]
        assert device["path"] == str(store.path_for(key)) and device["is_calibrated"]
        written = store.load(key)
        assert written.to_data() == device["calibration"]
        bus = fresh[name.removeprefix("fresh_")]
        config_cls = OmxFollowerConfig if build is omx_follower else OmxLeaderConfig
        arm = build(config_cls(port=bus.port, id=key.id), calibration_store=store)
        arm.connect()
        try:
            (target,) = arm.calibration_targets()
            assert target.is_calibrated and target.bus.read_calibration() == written
            assert target.calibration_plan.factory_calibration == written  # LeRobot's factory's
        finally:
            arm.disconnect()


class OneMotorAtATime(ScriptedConsole):
    """A person connecting each fresh motor alone when asked, in the order of `fresh`."""

    def __init__(self, bus: VirtualServoBus, fresh: list[int]) -> None:
        super().__init__()
        self.bus, self.queue, self.current = bus, [bus.motor(i) for i in fresh], None
        for motor in self.queue:
            bus.unplug(motor.id)

    def ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if self.current is not None:
            self.bus.unplug(self.current.id)
        self.current = self.queue.pop(0)
        self.bus.plug(self.current.id)
        return ""


@pytest.mark.parametrize(
    ("build", "config", "models", "ids"),
    [
        (omx_follower, OmxFollowerConfig, FOLLOWER, range(11, 17)),
        (omx_leader, OmxLeaderConfig, LEADER, range(1, 7)),
    ],
    ids=["follower", "leader"],
)
def test_setup_motors_gives_each_fresh_motor_lerobots_id(
    build, config, models, ids, virtual, tmp_path, monkeypatch
):
    # Only the factory rate is scanned: a scan of every rate is the buses' tests' business.
    monkeypatch.setattr(DynamixelMotorBus, "_family_baudrates", lambda self: [57_600])
    # A broadcast ping waits out the window of all 253 ids (1.4 s at 57600 baud); one motor
    # close by answers well within a fifth of a second.
    monkeypatch.setattr(DynamixelMotorBus, "_broadcast_window_s", lambda self: 0.2)
    # Fresh motors, gripper first as they are asked for, each at an id of its own.
    wanted = list(reversed(models.items()))
    fresh = {100 + k: model for k, (_, model) in enumerate(wanted)}
    bus = VirtualServoBus("dynamixel", fresh, baudrate=57_600, tau_s=0.01).start()
    try:
        arm = build(config(port=bus.port, id="x"), calibration_store=CalibrationFiles(tmp_path))
        console = OneMotorAtATime(bus, list(fresh))
        done = SetupMotors(console)(arm.calibration_targets()[0])
        assert done == list(reversed(OMX_JOINTS))
        assert sorted(m.id for m in bus.motors) == list(ids)
        assert all(m.baudrate == 1_000_000 for m in bus.motors)
        assert {m.id: m.model.name for m in bus.motors} == models
    finally:
        bus.stop()
