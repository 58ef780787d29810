"""The Robstride CAN bus against emulated motors on python-can's `virtual` interface: the protocol
(state queries, MIT and velocity commands, enable/disable, zero, mode switches), the faults a real
bus has (a motor that stops answering, a corrupted frame, a fault frame, a missing interface),
and frames byte-equal to LeRobot 0.6.1's bus for the same commands."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from rlctl.adapters.motors import robstride_protocol as rs
from rlctl.adapters.motors.robstride import RobstrideMotorBus
from rlctl.adapters.motors.virtual_robstride import VirtualRobstrideMotors
from rlctl.adapters.robots.buses import motor_bus
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported
from rlctl.domain.motors import Motor

pytestmark = pytest.mark.timeout(30)

MODELS = {"shoulder": "o3", "elbow": "o2", "wrist": "o0"}
IDS = {"shoulder": 1, "elbow": 2, "wrist": 3}
TIMEOUT_S = 0.2  # generous: the emulator is a thread on a loaded machine
_channels = itertools.count()


def motors() -> dict[str, Motor]:
    return {n: Motor(IDS[n], MODELS[n], MotorNormMode.DEGREES) for n in MODELS}


@pytest.fixture
def rig():
    channel = f"robstride-test-{next(_channels)}"
    emulated = VirtualRobstrideMotors(channel, {IDS[n]: (IDS[n], MODELS[n]) for n in MODELS})
    with emulated:
        bus = RobstrideMotorBus(
            channel, motors(), interface="virtual", timeout_s=TIMEOUT_S, retries=1
        )
        yield emulated, bus
        bus.disconnect(disable_torque=False)


def test_positions_are_read_in_degrees_and_goals_reach_the_motors_with_their_gains(rig):
    emulated, bus = rig
    bus.connect()
    emulated.move(1, 45.0)
    emulated.move(3, -30.0)
    positions = bus.sync_read("Present_Position")
    assert positions["shoulder"] == pytest.approx(45.0, abs=0.05)
    assert positions["wrist"] == pytest.approx(-30.0, abs=0.05)
    assert bus.read("Temperature_MOS", "elbow") == pytest.approx(31.5)
    assert not any(m.enabled for m in emulated.motors.values())  # the handshake moved nothing

    bus.configure_motors()
    bus.sync_write("Kp", {"shoulder": 240.0, "elbow": 240.0, "wrist": 25.0})
    bus.write("Kd", "wrist", 0.3)
    bus.sync_write("Goal_Position", {"shoulder": 10.0, "elbow": 90.0, "wrist": -12.5})
    command = emulated.motors[3].commands[-1]
    assert command.kp == pytest.approx(25.0, abs=0.2) and command.kd == pytest.approx(0.3, abs=0.01)
    assert bus.read("Present_Position", "elbow") == pytest.approx(90.0, abs=0.05)
    assert bus.last_state("wrist").position == pytest.approx(-12.5, abs=0.05)
    assert all(len(frame) == 8 for m in emulated.motors.values() for frame in m.frames)


def test_velocity_mode_takes_goal_velocities_and_refuses_positions(rig):
    emulated, bus = rig
    bus.connect()
    bus.enable_torque(["wrist"])
    with pytest.raises(InvalidInput, match="'wrist' is in MIT mode: Goal_Velocity needs velocity"):
        bus.write("Goal_Velocity", "wrist", 90.0)
    bus.switch_mode(rs.MODE_VELOCITY, ["wrist"])
    assert emulated.motors[3].mode == rs.MODE_VELOCITY
    bus.write("Goal_Velocity", "wrist", 90.0)
    velocity, current = emulated.motors[3].velocity_commands[-1]
    assert velocity == pytest.approx(90.0, rel=1e-6) and current == rs.VELOCITY_CURRENT_LIMIT_A
    assert bus.read("Present_Velocity", "wrist") == pytest.approx(90.0, abs=1.0)
    with pytest.raises(InvalidInput, match="needs MIT mode"):
        bus.write("Goal_Position", "wrist", 0.0)


def test_goals_beyond_what_the_frames_carry_are_refused(rig):
    """A position past PMAX would saturate to it; a velocity of 1e45 did not even pack."""
    emulated, bus = rig
    bus.connect()
    bus.enable_torque(["wrist"])
    with pytest.raises(InvalidInput, match="Goal_Position of 'wrist' is 1e\\+06, beyond"):
        bus.write("Goal_Position", "wrist", 1e6)
    bus.switch_mode(rs.MODE_VELOCITY, ["wrist"])
    for huge in (1e30, 1e45):
        with pytest.raises(InvalidInput, match=r"Goal_Velocity of 'wrist' is .*beyond"):
            bus.write("Goal_Velocity", "wrist", huge)
    assert not emulated.motors[3].velocity_commands


def test_a_silent_motor_fails_the_exchange_by_name_after_its_retries(rig):
    emulated, bus = rig
    bus.connect()
    emulated.silence(2)
    with pytest.raises(
        HardwareError,
        match=r"'elbow' \(CAN id 0x02\) did not answer read "
        r"Present_Position after 2 tries",
    ) as caught:
        bus.sync_read("Present_Position")
    assert caught.value.where == bus.where
    assert sum(f[7] == rs.CMD_CLEAR_FAULT for f in emulated.motors[2].frames) == 3  # + handshake
    emulated.silence(2, False)
    assert bus.read("Present_Position", "elbow") == pytest.approx(0.0, abs=0.05)


def test_a_silent_motor_fails_the_handshake_and_leaves_the_bus_closed(rig):
    emulated, bus = rig
    emulated.silence(1)
    with pytest.raises(HardwareError, match=r"'shoulder'.*did not answer a state query") as caught:
        bus.connect()
    assert "MotorStudio" in caught.value.hint
    assert not bus.is_connected


def test_a_corrupted_frame_is_named_and_never_taken_for_a_state(rig):
    emulated, bus = rig
    bus.connect()
    emulated.move(1, 20.0)
    bus.enable_torque(["shoulder"])
    emulated.corrupt(1)
    with pytest.raises(
        HardwareError,
        match=r"'shoulder'.*answered an MIT position command with "
        r"a feedback frame of 5 bytes",
    ):
        bus.write("Goal_Position", "shoulder", 0.0)
    emulated.corrupt(1, False)
    assert bus.read("Present_Position", "shoulder") == pytest.approx(0.0, abs=0.05)


def test_a_fault_frame_fails_at_once_with_its_bits(rig):
    emulated, bus = rig
    bus.connect()
    emulated.fault(2, 0x0000_0010)
    with pytest.raises(HardwareError, match=r"'elbow'.*fault bits 0x00000010"):
        bus.sync_read("Present_Position")


def test_zeroing_makes_the_present_position_zero_and_disconnect_disables_torque(rig):
    emulated, bus = rig
    bus.connect()
    emulated.move(2, 33.0)
    assert bus.set_half_turn_homings(["elbow"]) == {"elbow": 0}
    assert bus.read("Present_Position", "elbow") == pytest.approx(0.0, abs=0.05)
    bus.enable_torque()
    bus.disconnect()
    assert not bus.is_connected and not any(m.enabled for m in emulated.motors.values())


def test_bad_input_is_refused_before_anything_is_sent(rig):
    _, bus = rig
    bus.connect()
    with pytest.raises(InvalidInput, match="finite"):
        bus.sync_write("Goal_Position", {"shoulder": float("nan")})
    with pytest.raises(InvalidInput, match=r"Kp of 'shoulder' is 900, outside \[0, 500\]"):
        bus.write("Kp", "shoulder", 900)
    with pytest.raises(InvalidInput, match="no writable register 'Torque_Enable'"):
        bus.write("Torque_Enable", "shoulder", 1)
    with pytest.raises(InvalidInput, match="no motor 'hand'"):
        bus.read("Present_Position", "hand")
    with pytest.raises(NotSupported, match="MotorStudio"):
        bus.setup_motor("shoulder")
    with pytest.raises(InvalidInput, match="share the receive id 0x02"):
        RobstrideMotorBus("x", motors(), recv_ids={"wrist": 2})
    with pytest.raises(InvalidInput, match="unknown Robstride motor model"):
        RobstrideMotorBus("x", {"a": Motor(1, "dm4310", MotorNormMode.DEGREES)})


def test_a_missing_interface_is_a_clear_error():
    bus = RobstrideMotorBus("rlctlnocan9", motors(), interface="socketcan")
    with pytest.raises(
        HardwareError, match="cannot open the CAN interface 'rlctlnocan9'"
    ) as caught:
        bus.connect()
    assert "ip link show rlctlnocan9" in caught.value.hint
    assert not bus.is_connected


def test_the_bus_is_built_by_name_through_the_registry():
    channel = f"robstride-test-{next(_channels)}"
    with VirtualRobstrideMotors(channel, {5: (0x25, "O6")}):
        bus = motor_bus(
            "robstride",
            {"wrist": Motor(5, "O6", MotorNormMode.DEGREES)},
            port=channel,
            interface="virtual",
            recv_ids={"wrist": 0x25},
            timeout_s=TIMEOUT_S,
        )
        assert isinstance(bus, RobstrideMotorBus)
        bus.connect()
        try:
            assert bus.read("Present_Position", "wrist") == pytest.approx(0.0, abs=0.2)
        finally:
            bus.disconnect()


def test_frames_round_trip_within_a_step_of_their_scale():
    for model, (pmax, _vmax, tmax) in rs.MODEL_LIMITS.items():
        command = rs.decode_mit(model, rs.encode_mit(model, 240.0, 5.0, 123.4, -50.0, 1.5))
        assert command.position_deg == pytest.approx(123.4, abs=math.degrees(2 * pmax / 65535))
        assert command.kp == pytest.approx(240.0, abs=0.2)
        state = rs.decode_feedback(model, 3, rs.encode_feedback(model, 3, -87.0, 12.0, -0.5, 40.2))
        assert state.position == pytest.approx(-87.0, abs=math.degrees(2 * pmax / 65535))
        assert state.torque == pytest.approx(-0.5, abs=2 * tmax / 4095)
        assert state.temp_mos == pytest.approx(40.2)
    with pytest.raises(rs.MalformedFrame, match="for id 0x04"):
        rs.decode_feedback("o0", 3, rs.encode_feedback("o0", 4, 0, 0, 0))
    assert rs.fault_bits(rs.fault_frame(3, 0x81)) == 0x81
    assert rs.fault_bits(rs.encode_feedback("o0", 3, 0, 0, 0)) is None


STEPS = [
    ["enable", ["shoulder", "wrist"]],
    ["mode", rs.MODE_MIT, ["shoulder", "elbow"]],
    ["gains", "Kp", {"shoulder": 240.0, "elbow": 24.0, "wrist": 0.0}],
    ["gains", "Kd", {"shoulder": 5.0, "elbow": 0.3, "wrist": 0.0}],
    ["goal", {"shoulder": 45.0, "elbow": -123.4, "wrist": 700.0}],  # near its scale's end (±720°)
    ["query", ["elbow"]],
    ["zero", ["wrist"]],
    ["disable", ["shoulder"]],
    ["mode", rs.MODE_VELOCITY, ["wrist"]],
    ["velocity", {"wrist": -37.25}],
]


def _ours(steps: list[list]) -> dict[str, list]:
    """The frames rlctl's bus sends for the same steps (python-can's virtual bus, recorded by
    the emulator), in LeRobot's script's layout."""
    channel = f"robstride-test-{next(_channels)}"
    out: dict[str, list] = {}
    with VirtualRobstrideMotors(channel, {1: (1, "o3"), 2: (2, "o2"), 3: (3, "o0")}) as emu:
        bus = RobstrideMotorBus(channel, motors(), interface="virtual", timeout_s=TIMEOUT_S)
        bus.connect()
        try:
            for step, (kind, *args) in enumerate(steps):
                for m in emu.motors.values():
                    m.frames.clear()
                if kind == "gains":
                    bus.sync_write(args[0], args[1])
                    continue
                first = args[0]
                if kind == "enable":
                    bus.enable_torque(first)
                elif kind == "disable":
                    bus.disable_torque(first)
                elif kind == "zero":
                    bus.set_zero_position(first)
                elif kind == "query":
                    bus.sync_read("Present_Position", first)
                elif kind == "mode":
                    bus.switch_mode(first, args[1])
                else:
                    bus.sync_write("Goal_Position" if kind == "goal" else "Goal_Velocity", first)
                out[str(step)] = [
                    [m.send_id, list(frame), False, False]
                    for m in emu.motors.values()
                    for frame in m.frames
                ]
        finally:
            bus.disconnect(disable_torque=False)
    return out


def test_frames_match_the_constants_derived_from_lerobots_bus():
    ours = _ours(STEPS)
    assert ours["0"] == [
        [1, [255] * 7 + [0xFC], False, False],
        [3, [255] * 7 + [0xFC], False, False],
    ]
    assert ours["1"][0] == [1, [255] * 6 + [0, 0xFC], False, False]
    assert ours["5"] == [[2, [255] * 7 + [0xFB], False, False]]
    # LeRobot's arithmetic by hand: 45° on an O3 (±12.57 rad) -> int(13.3554 / 25.14 * 65535)
    # = 0x87FE; kp 240 -> int(0.48 * 4095) = 0x7AD; kd 5 -> 0xFFF; v = 0, τ = 0 -> 0x7FF.
    assert ours["4"][0][1] == [0x87, 0xFE, 0x7F, 0xF7, 0xAD, 0xFF, 0xF7, 0xFF]
    assert ours["9"] == [[3, list(rs.encode_velocity(-37.25)), False, False]]


@pytest.mark.lerobot
def test_frames_are_byte_equal_to_lerobots_robstride_bus(lerobot):
    feedback = [
        rs.encode_feedback(model, recv, pos, vel, tau, temp).hex()
        for model, recv in (("o3", 1), ("o0", 3))
        for pos, vel, tau, temp in ((0.0, 0.0, 0.0, 25.0), (-87.5, 120.0, -3.25, 41.7))
    ]
    job = {
        "motors": {n: [IDS[n], MODELS[n].upper(), IDS[n]] for n in MODELS},
        "steps": STEPS,
        "feedback": feedback,
    }
    script = Path(__file__).with_name("lerobot_robstride_frames.py")
    theirs = lerobot(script, json.dumps(job), timeout=120)
    ours = _ours(STEPS)
    for step in ours:
        assert ours[step] == theirs[step], f"step {step}: {STEPS[int(step)]}"
    for data, (pos, vel, tau, temp) in zip(feedback, theirs["feedback"], strict=True):
        model = MODELS["shoulder"] if data[:2] == "01" else "o0"
        state = rs.decode_feedback(model, int(data[:2], 16), bytes.fromhex(data))
        assert state.position == pytest.approx(pos, abs=1e-9)
        assert state.velocity == pytest.approx(vel, abs=1e-9)
        assert state.torque == pytest.approx(tau, abs=1e-9)
        assert state.temp_mos == pytest.approx(temp, abs=1e-9)
