"""LeKiwi: its host driving an emulated Feetech bus (arm in position mode, three wheels in velocity
mode) and the client over ZeroMQ — LeRobot 0.6.1's messages and feature names, base velocities
in the action, the safety guards on both sides, and the host's watchdog stopping the base when
the client goes silent."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.cameras.config import SyntheticCameraConfig
from rlctl.adapters.memory.calibration_store import InMemoryCalibrationStore
from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.memory.motor_bus import InMemoryMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import LeKiwiClientConfig, LeKiwiConfig
from rlctl.adapters.robots.lekiwi import (
    ARM_MOTORS,
    BASE_MOTORS,
    STATE_NAMES,
    body_to_wheel_raw,
    lekiwi,
    lekiwi_motors,
    wheel_raw_to_body,
)
from rlctl.adapters.robots.lekiwi_client import LeKiwiClient, _header_contents
from rlctl.adapters.robots.lekiwi_host import MAX_COMMAND_BYTES, LeKiwiHost, decode_command
from rlctl.application.robot_features import STATE_KEY
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput

pytestmark = pytest.mark.timeout(120)

CAMERA = {"front": SyntheticCameraConfig(width=32, height=24, fps=30)}


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def write_calibration(folder: Path, robot_id: str) -> Path:
    """LeRobot's file for a LeKiwi: nine motors, the wheels and wrist roll a whole turn."""
    entries = {}
    for i, name in enumerate((*ARM_MOTORS, *BASE_MOTORS), start=1):
        full = name in ("arm_wrist_roll", *BASE_MOTORS)
        entries[name] = {
            "id": i,
            "drive_mode": 0,
            "homing_offset": 0,
            "range_min": 0 if full else 1024,
            "range_max": 4095 if full else 3072,
        }
    path = folder / "robots" / "lekiwi" / f"{robot_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=4))
    return path


@pytest.fixture
def kiwi_bus():
    bus = VirtualServoBus.uniform("feetech", "sts3215", range(1, 10)).start()
    yield bus
    bus.stop()


def wait_for(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_lerobots_kinematics_round_trip_and_scale_the_wheels_together():
    wheels = body_to_wheel_raw(0.1, 0.0, 0.0)
    assert (
        wheels["base_back_wheel"] == 0 and wheels["base_left_wheel"] == -wheels["base_right_wheel"]
    )
    x, y, theta = wheel_raw_to_body(*wheels.values())
    assert (x, y, theta) == pytest.approx((0.1, 0.0, 0.0), abs=2e-3)
    fast = body_to_wheel_raw(5.0, 0.0, 400.0)  # far past 3000 ticks/s: scaled, not clipped
    assert max(abs(v) for v in fast.values()) == 3000
    # By hand: cos(150°) · 0.1 m/s / 5 cm = -1.732 rad/s = -99.24 deg/s = -1129.1 ticks/s.
    assert body_to_wheel_raw(0.1, 0.0, 0.0) == {
        "base_left_wheel": -1129,
        "base_back_wheel": 0,
        "base_right_wheel": 1129,
    }


@pytest.mark.lerobot
def test_kinematics_equal_lerobots(lerobot):
    cases = [[0.1, 0.0, 0.0], [0.2, -0.1, 45.0], [5.0, 2.0, 400.0], [0.0, 0.0, -90.0]]
    code = (
        "import json, sys\n"
        "from lerobot.robots.lekiwi.lekiwi import LeKiwi\n"
        "kiwi = object.__new__(LeKiwi)\n"
        "cases = json.loads(sys.argv[1])\n"
        "wheels = [kiwi._body_to_wheel_raw(*c) for c in cases]\n"
        "body = [kiwi._wheel_raw_to_body(*w.values()) for w in wheels]\n"
        "print(json.dumps({'wheels': wheels, 'body': [[float(v) for v in b.values()] "
        "for b in body]}))\n"
    )
    theirs = lerobot("-c", code, json.dumps(cases), timeout=120)
    for case, wheels, body in zip(cases, theirs["wheels"], theirs["body"], strict=True):
        ours = body_to_wheel_raw(*case)
        assert ours == wheels
        assert wheel_raw_to_body(*ours.values()) == pytest.approx(tuple(body), abs=1e-9)


def test_calibration_homes_the_arm_not_the_wheels_as_lerobot_does():
    bus = InMemoryMotorBus(lekiwi_motors(use_degrees=True), port="memory://kiwi")
    store = InMemoryCalibrationStore()
    robot = lekiwi(
        LeKiwiConfig(port=bus.port, id="kiwi"), calibration_store=store, bus=bus, cameras={}
    )
    robot.connect()
    for i, name in enumerate((*ARM_MOTORS, *BASE_MOTORS)):
        bus.move_by_hand(name, 1500 + 100 * i)  # the wheels wherever they stopped
    ranged = [m for m in ARM_MOTORS if m != "arm_wrist_roll"]

    def sweep(poll: int) -> None:
        for motor in ranged:
            bus.move_by_hand(motor, (900, 3100)[min(poll, 2) - 1])

    console = ScriptedConsole([""], enter_after_polls=3, on_poll=sweep)
    (arm,) = robot.calibration_targets()
    calibration = CalibrateRobot(store, console, ManualClock())(arm).calibration
    # LeRobot's `LeKiwi.calibrate`: the arm's six motors homed to half a turn, the wheels not.
    assert {m: calibration[m].homing_offset for m in ARM_MOTORS} == {
        m: 1500 + 100 * i - 2047 for i, m in enumerate(ARM_MOTORS)
    }
    assert {calibration[m].homing_offset for m in BASE_MOTORS} == {0}
    for motor in ("arm_wrist_roll", *BASE_MOTORS):
        assert (calibration[motor].range_min, calibration[motor].range_max) == (0, 4095)
    assert (calibration["arm_elbow_flex"].range_min, calibration["arm_elbow_flex"].range_max) == (
        900,
        3100,
    )
    assert [calibration[m].id for m in (*ARM_MOTORS, *BASE_MOTORS)] == list(range(1, 10))


def test_host_and_client_drive_the_arm_and_base_and_the_watchdog_stops_the_base(kiwi_bus, tmp_path):
    write_calibration(tmp_path, "kiwi")
    store = CalibrationFiles(root=tmp_path)
    robot = lekiwi(
        LeKiwiConfig(port=kiwi_bus.port, id="kiwi", cameras=CAMERA), calibration_store=store
    )
    cmd, obs = free_ports(2)
    host = LeKiwiHost(
        robot,
        port_zmq_cmd=cmd,
        port_zmq_observations=obs,
        connection_time_s=60,
        watchdog_timeout_ms=300,
        bind_address="127.0.0.1",
    )
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            host.run()
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = LeKiwiClient(
        LeKiwiClientConfig(
            remote_ip="127.0.0.1",
            port_zmq_cmd=cmd,
            port_zmq_observations=obs,
            cameras=CAMERA,
            connect_timeout_s=20,
        )
    )
    try:
        client.connect()
        assert client.action_features["action"].names == list(STATE_NAMES)
        observation = client.get_observation()
        assert observation[STATE_KEY].shape == (9,)
        assert observation["observation.images.front"].shape == (24, 32, 3)
        start = observation[STATE_KEY]

        goal = start.copy()
        goal[0] += 20.0  # shoulder pan
        goal[6] = 0.1  # x.vel
        sent = client.send_action(goal)
        assert sent == pytest.approx(goal)
        # Sent on every look: the watchdog stops the base 300 ms after the last action.
        assert wait_for(
            lambda: (
                client.send_action(goal) is not None
                and kiwi_bus.motor(7).spin != 0
                and kiwi_bus.motor(9).spin != 0
                and abs(client.get_observation()[STATE_KEY][6] - 0.1) < 5e-3
            )
        )
        assert kiwi_bus.motor(8).spin == 0  # straight ahead: the back wheel stays still
        assert abs(client.get_observation()[STATE_KEY][7]) < 5e-3

        # The client goes silent: the watchdog stops the wheels; the arm stays where sent.
        assert wait_for(lambda: all(kiwi_bus.motor(i).spin == 0 for i in (7, 8, 9)), 5)
        assert host.report.watchdog_stops >= 1
        assert wait_for(lambda: abs(client.get_observation()[STATE_KEY][0] - goal[0]) < 1.0, 5)

        # NaN never leaves the client: the arm holds, the base stays stopped.
        bad = goal.copy()
        bad[1] = np.nan
        held = client.send_action(bad)
        assert np.isfinite(held).all() and (held[6:] == 0).all()

        # The host's own guard: an arm goal far out of its calibrated range is refused and a
        # base command of 50 m/s stops the base.
        import zmq

        context = zmq.Context()
        raw = context.socket(zmq.PUSH)
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(f"tcp://127.0.0.1:{cmd}")
        wild = dict(zip(STATE_NAMES, map(float, goal), strict=True))
        wild.update({"arm_elbow_flex.pos": 1e6, "x.vel": 50.0})
        before = kiwi_bus.motor(3).register("Goal_Position")
        commands = host.report.commands
        raw.send_string(json.dumps(wild))
        assert wait_for(lambda: host.report.commands > commands, 5)
        assert kiwi_bus.motor(3).register("Goal_Position") == before
        assert all(kiwi_bus.motor(i).spin == 0 for i in (7, 8, 9))
        raw.send_string(json.dumps({"x.vel": 0.1}))  # lacks the arm: dropped
        assert wait_for(lambda: host.report.dropped == 1, 5)
        # Anything else a peer may send is dropped too, and the host goes on serving.
        hostile = [b"\xff\xfe", b"[" * 60_000, json.dumps({**wild, "x.vel": None}).encode()]
        for dropped, message in enumerate(hostile, start=2):
            raw.send(message)
            assert wait_for(lambda n=dropped: host.report.dropped == n, 5)
        raw.send(b" " * (MAX_COMMAND_BYTES + 1))  # too long: the peer is cut off, unread
        raw.close()
        time.sleep(0.3)
        assert thread.is_alive() and not failure
        assert host.report.dropped == 1 + len(hostile)
        context.term()

        with pytest.raises(InvalidInput, match="a LeKiwi action has 9 values"):
            client.send_action(np.zeros(6))
    finally:
        client.disconnect()
        host.stop_event.set()
        thread.join(timeout=10)
    assert not failure, failure
    assert not kiwi_bus.motor(1).torque_enabled  # torque off when the host stops


@pytest.mark.parametrize(
    "message,reason",
    [
        (b"\xff\xfe", "JSON object"),
        (b"[" * 100_000, "JSON object"),
        (b"[1, 2]", "got list"),
        (b'{"x.vel": 0.1}', "lacks"),
        (None, "is NoneType, not a number"),
        (True, "is bool, not a number"),
        ("0.5", "is str, not a number"),
        ([1.0], "is list, not a number"),
        (10**400, "out of range"),
    ],
)
def test_a_command_that_is_not_nine_numbers_is_refused_with_the_reason(message, reason):
    if not isinstance(message, bytes):
        command = dict.fromkeys(STATE_NAMES, 0.0)
        command["arm_wrist_roll.pos"] = message
        message = json.dumps(command).encode()
    with pytest.raises(ValueError, match=reason):
        decode_command(message)


def test_a_non_finite_command_is_let_through_for_the_robots_guard_to_hold():
    command = dict.fromkeys(STATE_NAMES, 0.0) | {"x.vel": float("nan")}
    assert np.isnan(decode_command(json.dumps(command).encode())[6])


GOOD_HEADER = {"_cams": ["front"], **dict.fromkeys(STATE_NAMES, 1.0)}


@pytest.mark.parametrize(
    "header,reason",
    [
        ("hello", "str, not an object"),
        (5, "int, not an object"),
        ({**GOOD_HEADER, "_cams": [["x"]]}, "_cams"),
        ({k: v for k, v in GOOD_HEADER.items() if k != "_cams"}, "_cams"),
        ({k: v for k, v in GOOD_HEADER.items() if k != "x.vel"}, "x.vel is NoneType"),
        ({**GOOD_HEADER, "arm_elbow_flex.pos": float("nan")}, "not a finite number"),
        ({**GOOD_HEADER, "x.vel": float("inf")}, "not a finite number"),
        ({**GOOD_HEADER, "x.vel": 1e300}, "not a finite number"),  # infinite in float32
        ({**GOOD_HEADER, "x.vel": 10**400}, "not a finite number"),
        ({**GOOD_HEADER, "x.vel": "1.0"}, "str, not a number"),
    ],
)
def test_an_observation_header_that_is_not_the_hosts_is_refused(header, reason):
    """The client drops such an observation and keeps its last good one: a missing or
    non-finite state would otherwise become the arm's position a held action sends back."""
    with pytest.raises(ValueError, match=reason):
        _header_contents(header)
    cameras, state = _header_contents(GOOD_HEADER)
    assert cameras == ["front"] and state.tolist() == [1.0] * 9


def test_a_client_without_a_host_is_told_to_start_one():
    cmd, obs = free_ports(2)
    client = LeKiwiClient(
        LeKiwiClientConfig(
            remote_ip="127.0.0.1",
            port_zmq_cmd=cmd,
            port_zmq_observations=obs,
            cameras={},
            connect_timeout_s=0.3,
        )
    )
    with pytest.raises(
        HardwareError,
        match=f"no observation from the LeKiwi host at tcp://127.0.0.1:{obs} within 0.3 s",
    ) as caught:
        client.connect()
    assert "rlctl lekiwi-host" in caught.value.hint
    assert not client.is_connected
    with pytest.raises(ConfigError, match="remote_ip must name"):
        LeKiwiClientConfig(remote_ip="")


def test_a_host_without_calibration_or_with_a_silent_motor_says_so(kiwi_bus, tmp_path):
    store = CalibrationFiles(root=tmp_path)
    config = LeKiwiConfig(port=kiwi_bus.port, id="new", cameras={})
    cmd, obs = free_ports(2)
    host = LeKiwiHost(
        lekiwi(config, calibration_store=store),
        port_zmq_cmd=cmd,
        port_zmq_observations=obs,
        bind_address="127.0.0.1",
    )
    with pytest.raises(Exception, match="no calibration") as caught:
        host.run()
    assert "rlctl calibrate --robot.type=lekiwi" in caught.value.hint
    write_calibration(tmp_path, "new")
    kiwi_bus.unplug(8)
    host = LeKiwiHost(
        lekiwi(config, calibration_store=store),
        port_zmq_cmd=cmd,
        port_zmq_observations=obs,
        bind_address="127.0.0.1",
    )
    with pytest.raises(HardwareError, match="base_back_wheel"):
        host.run()


@pytest.mark.slow
def test_rlctl_lekiwi_host_serves_a_client_in_another_process(kiwi_bus, tmp_path):
    write_calibration(tmp_path, "kiwi")
    cmd, obs = free_ports(2)
    rlctl = Path(sys.executable).with_name("rlctl")
    process = subprocess.Popen(
        [
            str(rlctl),
            "lekiwi-host",
            f"--robot.port={kiwi_bus.port}",
            "--robot.id=kiwi",
            "--robot.cameras={front: {type: synthetic, width: 32, height: 24, fps: 30}}",
            f"--host.port_zmq_cmd={cmd}",
            f"--host.port_zmq_observations={obs}",
            "--host.connection_time_s=60",
            "--host.watchdog_timeout_ms=300",
        ],
        env={**os.environ, "HF_LEROBOT_CALIBRATION": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    client = LeKiwiClient(
        LeKiwiClientConfig(
            remote_ip="127.0.0.1",
            port_zmq_cmd=cmd,
            port_zmq_observations=obs,
            cameras=CAMERA,
            connect_timeout_s=60,
        )
    )
    try:
        try:
            client.connect()
        except HardwareError as error:  # say what the host said (it failed in CI runs, rarely)
            process.kill()
            said, _ = process.communicate(timeout=30)
            raise AssertionError(f"{error}\nthe host said:\n{said}") from error
        goal = client.get_observation()[STATE_KEY].copy()
        goal[8] = 30.0  # theta.vel: turn on the spot, every wheel the same way
        # Sent on every look: the watchdog stops the base 300 ms after the last action.
        assert wait_for(
            lambda: (
                client.send_action(goal) is not None
                and len({kiwi_bus.motor(i).spin for i in (7, 8, 9)}) == 1
                and kiwi_bus.motor(7).spin != 0
            )
        )
        assert wait_for(lambda: all(kiwi_bus.motor(i).spin == 0 for i in (7, 8, 9)), 5)
    finally:
        client.disconnect()
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=30)
    assert "watchdog" in output or "no command" in output, output
    # The host's last writes turn the torque off; the emulated bus applies them a moment later.
    assert wait_for(lambda: not kiwi_bus.motor(7).torque_enabled, 5)


@pytest.mark.parametrize("field", ["base_max_linear_m_s", "base_max_angular_deg_s"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf])
def test_base_speed_limits_must_be_positive_and_finite(field, value):
    """An infinite one switched the base's guard off; NaN or negative failed later, unnamed."""
    for make in (
        lambda: LeKiwiConfig(port="/dev/null", **{field: value}),
        lambda: LeKiwiClientConfig(remote_ip="127.0.0.1", **{field: value}),
    ):
        with pytest.raises(ConfigError, match=f"{field} must be a positive finite number"):
            make()
