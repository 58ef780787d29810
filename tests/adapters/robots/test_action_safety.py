"""Nothing unsafe reaches a motor: NaN, infinities, absurd and overshooting actions sent to every
follower arm type on virtual servo buses (the real SDKs over a pseudo-terminal), in degrees and
in range units, with and without `max_relative_target`. The goal registers stay inside each
joint's calibrated range, a refused action leaves them where the last safe command put them, and
the refusal is said once per episode."""

from __future__ import annotations

import math
import typing

import attrs
import numpy as np
import pytest
import structlog

from rlctl.adapters.memory.motor_bus import InMemoryMotorBus
from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.tables import servo_model
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.arm_follower import ArmFollower
from rlctl.adapters.robots.bimanual import BimanualFollower
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import ArmFollowerConfig, BimanualFollowerConfig, RobotConfig
from rlctl.adapters.robots.koch_follower import koch_follower
from rlctl.adapters.robots.so_follower import so_follower
from rlctl.application.ports.robot import CalibrationKey
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.config import registered_types
from rlctl.domain.errors import InvalidInput

ARM_TYPES = sorted(
    name
    for name, cls in registered_types(RobotConfig).items()
    if issubclass(cls, ArmFollowerConfig)
)
# Arms on serial servo buses; the CAN arms get the same checks on emulated Damiao motors in
# their own files (test_openarm_follower.py, test_rebot_b601_follower.py), and their pairs
# share the bimanual guard tested here.
CAN_TYPES = {"bi_openarm_follower", "bi_rebot_b601_follower"}
BIMANUAL_TYPES = sorted(
    name
    for name, cls in registered_types(RobotConfig).items()
    if issubclass(cls, BimanualFollowerConfig) and name not in CAN_TYPES
)


@pytest.fixture(autouse=True)
def patient_buses(monkeypatch):
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 250.0)
    monkeypatch.setattr(DynamixelMotorBus, "default_timeout_margin_ms", 250.0)


def calibration_for(motors, full_turn) -> Calibration:
    """Ranges of different widths per joint, one inverted joint; free joints turn fully. Ranges
    are of a 4096-tick turn, scaled to the motor's (the SCS0009's 1024)."""
    entries = {}
    for i, (name, motor) in enumerate(motors.items()):
        scale = servo_model(motor.model).resolution / 4096
        low, high = (0, 4095) if name in full_turn else (700 + 90 * i, 3300 - 70 * i)
        low, high = int(low * scale), int(high * scale)
        entries[name] = MotorCalibration(motor.id, int(i == 2), 0, low, high)
    return Calibration(entries)


GARBAGE = [
    ("nan gripper", lambda mid: np.where(np.arange(mid.size) == mid.size - 1, np.nan, mid)),
    ("all nan", lambda mid: np.full(mid.size, np.nan)),
    ("+inf", lambda mid: np.where(np.arange(mid.size) == 0, np.inf, mid)),
    ("-inf", lambda mid: np.where(np.arange(mid.size) == 1, -np.inf, mid)),
    ("huge", lambda mid: np.full(mid.size, 1e30)),
    ("float32 max", lambda mid: np.full(mid.size, 3e38)),
    ("far below", lambda mid: mid - 1e4),
]


def goals(bus: VirtualServoBus, motors) -> dict[str, int]:
    return {name: bus.motor(m.id).register("Goal_Position") for name, m in motors.items()}


@pytest.mark.parametrize("robot_type", ARM_TYPES)
def test_no_action_moves_a_motor_outside_its_range(robot_type, tmp_path):
    config_cls = registered_types(RobotConfig)[robot_type]
    store = CalibrationFiles(tmp_path)
    fields = attrs.fields_dict(config_cls)
    # A hand needs its side; arms with a choice of units are tried in both.
    extra = {"side": "right"} if "side" in fields else {}
    units = [{"use_degrees": True}, {"use_degrees": False}] if "use_degrees" in fields else [{}]
    probe = config_cls(port="/dev/null", id="arm", **extra).build(store)
    assert isinstance(probe, ArmFollower)
    motors = dict(probe.arm.bus.motors)
    full_turn = probe.arm.calibration_plan.full_turn_motors
    family = str(servo_model(next(iter(motors.values())).model).family)
    with VirtualServoBus(family, {m.id: m.model for m in motors.values()}, tau_s=0.01) as bus:
        calibration = calibration_for(motors, full_turn)
        store.save(CalibrationKey("robots", probe.robot_type, "arm"), calibration)
        for unit in units:
            for max_step in (None, 5.0):
                config = config_cls(
                    port=bus.port, id="arm", max_relative_target=max_step, **extra, **unit
                )
                robot = config.build(store)
                robot.connect()
                try:
                    check_every_kind_of_garbage(robot, bus, motors, calibration, max_step)
                finally:
                    robot.disconnect()


def check_every_kind_of_garbage(robot, bus, motors, calibration, max_step):
    def inside(written):
        for name, ticks in written.items():
            entry = calibration[name]
            assert entry.range_min <= ticks <= entry.range_max, (name, ticks, entry)

    with structlog.testing.capture_logs() as logs:
        robot.reset()
        mid = robot.get_observation()["observation.state"].astype(np.float64)
        for _ in range(3):  # walk to somewhere inside every range, in capped steps
            sent = robot.send_action(mid)
        robot.get_observation()  # a request answered after the write: the write has landed
        safe = goals(bus, motors)
        inside(safe)
        for label, make in GARBAGE:
            sent = robot.send_action(make(mid))
            assert np.all(np.isfinite(sent)), label
            robot.get_observation()
            assert goals(bus, motors) == safe, label  # held: nothing moved
        # An overshoot is clipped to the range's end, not held.
        robot.send_action(mid + 0.05 * np.abs(mid).max() + 1)
        robot.get_observation()
        inside(goals(bus, motors))
    holds = [e for e in logs if e["event"].startswith("action refused")]
    assert len(holds) == 1, holds  # once per episode
    assert "non-finite" in holds[0]["reason"]


def arm_config_class(config_cls: type) -> type:
    """The class of a bimanual config's `left_arm_config` (its annotations are strings)."""
    return typing.get_type_hints(config_cls)["left_arm_config"]


@pytest.mark.parametrize("robot_type", BIMANUAL_TYPES)
def test_garbage_in_either_half_never_moves_a_motor_of_a_bimanual_robot_outside_its_range(
    robot_type, tmp_path
):
    """NaN, infinities and absurd values in one arm's half of the action: that arm holds its last
    safe command, neither arm's goals leave their calibrated ranges, the other arm still moves."""
    config_cls = registered_types(RobotConfig)[robot_type]
    arm_cls = arm_config_class(config_cls)
    store = CalibrationFiles(tmp_path)
    probe = config_cls(
        id="duo", left_arm_config=arm_cls(port="/dev/a"), right_arm_config=arm_cls(port="/dev/b")
    ).build(store)
    assert isinstance(probe, BimanualFollower)
    sides = {side: arm.arm for side, arm in probe.arms.items()}
    motors = dict(sides["left"].bus.motors)
    full_turn = sides["left"].calibration_plan.full_turn_motors
    family = str(servo_model(next(iter(motors.values())).model).family)
    models = {m.id: m.model for m in motors.values()}
    base = calibration_for(motors, full_turn)
    calibrations = {
        "left": base,
        # The right arm's ranges differ from the left's: each half is checked against its own.
        "right": Calibration(
            {
                name: base[name]
                if name in full_turn
                else MotorCalibration(base[name].id, 0, 0, base[name].range_min + 150, 3000)
                for name in base
            }
        ),
    }
    with (
        VirtualServoBus(family, models, tau_s=0.01) as left,
        VirtualServoBus(family, models, tau_s=0.01) as right,
    ):
        buses = {"left": left, "right": right}
        for side, arm in sides.items():
            store.save(arm.calibration_key, calibrations[side])
        n = len(motors)
        for use_degrees in (True, False):
            for max_step in (None, 5.0):
                arm_settings = dict(use_degrees=use_degrees, max_relative_target=max_step)
                robot = config_cls(
                    id="duo",
                    left_arm_config=arm_cls(port=left.port, **arm_settings),
                    right_arm_config=arm_cls(port=right.port, **arm_settings),
                ).build(store)
                robot.connect()
                try:
                    with structlog.testing.capture_logs() as logs:
                        robot.reset()
                        mid = robot.get_observation()["observation.state"].astype(np.float64)
                        for _ in range(3):
                            robot.send_action(mid)
                        robot.get_observation()
                        safe = {side: goals(buses[side], motors) for side in buses}
                        for i, side in enumerate(("left", "right")):
                            half = slice(i * n, (i + 1) * n)
                            other = slice((1 - i) * n, (2 - i) * n)
                            other_side = "right" if side == "left" else "left"
                            for k, (label, make) in enumerate(GARBAGE):
                                action = mid.copy()
                                action[half] = make(mid[half])
                                action[other] = mid[other] + (2.0 if k % 2 == 0 else -2.0)
                                before = goals(buses[other_side], motors)
                                sent = robot.send_action(action)
                                assert np.all(np.isfinite(sent)), (side, label)
                                robot.get_observation()
                                assert goals(buses[side], motors) == safe[side], (side, label)
                                assert goals(buses[other_side], motors) != before, (side, label)
                                for s, bus in buses.items():
                                    for name, ticks in goals(bus, motors).items():
                                        entry = calibrations[s][name]
                                        assert entry.range_min <= ticks <= entry.range_max, (
                                            s,
                                            side,
                                            label,
                                            name,
                                        )
                            safe = {s: goals(buses[s], motors) for s in buses}
                    holds = [e for e in logs if e["event"].startswith("action refused")]
                    # Once per episode and arm, each naming its side.
                    assert sorted(e["robot"] for e in holds) == [
                        f"{robot_type} left arm",
                        f"{robot_type} right arm",
                    ]
                    with pytest.raises(InvalidInput, match=f"takes {2 * n}"):
                        robot.send_action(mid[:n])
                finally:
                    robot.disconnect()


@pytest.mark.parametrize("build", [so_follower, koch_follower], ids=["so", "koch"])
@pytest.mark.parametrize("use_degrees", [True, False])
def test_random_action_streams_never_leave_the_calibrated_range(build, use_degrees, tmp_path):
    """A property over many sequences (finite or not) on the in-memory bus: every Goal_Position
    written is inside the calibrated range, in ticks."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from rlctl.adapters.robots import koch_follower as koch
    from rlctl.adapters.robots import so_follower as so
    from rlctl.adapters.robots.config import KochFollowerConfig, SO101FollowerConfig

    config_cls = SO101FollowerConfig if build is so_follower else KochFollowerConfig
    motors = (
        so.so_motors(use_degrees=use_degrees)
        if build is so_follower
        else koch.koch_follower_motors(use_degrees=use_degrees)
    )
    calibration = calibration_for(motors, so.FULL_TURN if build is so_follower else koch.FULL_TURN)
    values = st.floats(allow_nan=True, allow_infinity=True) | st.floats(-300, 300)

    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        actions=st.lists(st.lists(values, min_size=6, max_size=6), min_size=1, max_size=12),
        max_step=st.none() | st.floats(0.5, 50),
    )
    def run(actions, max_step):
        bus = InMemoryMotorBus(motors, port="memory://arm")
        store = CalibrationFiles(tmp_path)
        store.save(CalibrationKey("robots", build.__module__.split(".")[-1], "p"), calibration)
        robot = build(
            config_cls(
                port=bus.port, id="p", use_degrees=use_degrees, max_relative_target=max_step
            ),
            calibration_store=store,
            bus=bus,
            cameras={},
        )
        robot.connect()
        written = []
        original = bus.sync_write

        def spy(register, values, *, normalize=True):
            original(register, values, normalize=normalize)
            if register == "Goal_Position":
                written.append({m: bus.registers[m]["Goal_Position"] for m in values})

        bus.sync_write = spy
        for action in actions:
            sent = robot.send_action(np.asarray(action))
            assert np.all(np.isfinite(sent))
        for goal in written:
            for name, ticks in goal.items():
                assert calibration[name].range_min <= ticks <= calibration[name].range_max
        assert not any(math.isnan(v) for goal in written for v in goal.values())

    run()


def test_a_simulated_robot_is_guarded_like_an_arm():
    """NaN and absurd actions never reach the simulator; an overshoot is clipped to the action
    space, as the env itself would."""
    pytest.importorskip("gym_pusht")
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot
    from rlctl.adapters.sim.registry import make_env_config

    robot = SimRobot(SimRobotConfig(env=make_env_config("pusht", obs_type="state")))
    robot.connect()
    stepped = []
    env = robot._env
    original = env.step

    def spy(actions):
        stepped.append(np.array(actions))
        return original(actions)

    env.step = spy
    try:
        with structlog.testing.capture_logs() as logs:
            robot.reset()
            first = robot.send_action(np.array([np.nan, 100.0]))  # nothing safe yet
            assert np.all(np.isfinite(first)) and stepped == []
            robot.send_action(np.array([200.0, 300.0]))
            held = robot.send_action(np.array([np.inf, 1e30]))
            np.testing.assert_array_equal(held, [200.0, 300.0])
            clipped = robot.send_action(np.array([520.0, 300.0]))  # 512 is the edge
            np.testing.assert_array_equal(clipped, [512.0, 300.0])
            robot.reset()
            robot.send_action(np.array([np.nan, np.nan]))
    finally:
        robot.disconnect()
    assert all(np.all(np.isfinite(a)) for a in stepped) and len(stepped) == 3
    holds = [e for e in logs if e["event"].startswith("action refused")]
    assert len(holds) == 2  # once in each episode


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e308])
@pytest.mark.parametrize("normalize", [True, False])
def test_the_motor_layer_refuses_non_finite_writes_with_a_clear_error(value, normalize, tmp_path):
    """The last line of defence, below the guard: a bus never turns garbage into ticks, and says
    so as an rlctl error rather than a bare ValueError or OverflowError."""
    from rlctl.adapters.robots.so_follower import FULL_TURN, so_motors
    from rlctl.domain.errors import InvalidInput

    motors = so_motors(use_degrees=True)
    with VirtualServoBus("feetech", {m.id: m.model for m in motors.values()}, tau_s=0.01) as v:
        buses = [InMemoryMotorBus(motors, port="memory://arm"), FeetechMotorBus(v.port, motors)]
        for bus in buses:
            bus.connect()
            bus.calibration = calibration_for(motors, FULL_TURN)
            try:
                # 1e308 is finite: a range-mode gripper clamps it to 100, as LeRobot does;
                # in degrees, and raw, it is too large for any register.
                joints = ["elbow_flex"] if value == 1e308 else ["elbow_flex", "gripper"]
                if value == 1e308 and not normalize and isinstance(bus, InMemoryMotorBus):
                    continue  # the fake keeps any integer; the real register refuses it
                for joint in joints:
                    with pytest.raises(InvalidInput) as caught:
                        bus.sync_write("Goal_Position", {joint: value}, normalize=normalize)
                    assert joint in str(caught.value)
            finally:
                bus.disconnect(disable_torque=False)
