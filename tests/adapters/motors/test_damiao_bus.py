"""The Damiao CAN bus against emulated motors on python-can's `virtual` interface: the protocol
(refresh, MIT commands, enable/disable, zero, parameter reads), and the faults a real bus has —
a motor that stops answering, a corrupted frame, a motor reporting a fault, a missing interface."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from rlctl.adapters.motors import damiao_protocol as dm
from rlctl.adapters.motors.damiao import DamiaoMotorBus
from rlctl.adapters.motors.virtual_damiao import VirtualDamiaoMotors
from rlctl.adapters.robots.buses import motor_bus
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported
from rlctl.domain.motors import Motor

pytestmark = pytest.mark.timeout(30)

MODELS = {"joint_1": "dm8009", "joint_2": "dm4340", "gripper": "dm4310"}
IDS = {"joint_1": 1, "joint_2": 4, "gripper": 8}
# Generous: the emulator is a thread on a loaded machine. Tests of silence pay it per try.
TIMEOUT_S = 0.2
_channels = itertools.count()


def motors() -> dict[str, Motor]:
    return {n: Motor(IDS[n], MODELS[n], MotorNormMode.DEGREES) for n in MODELS}


@pytest.fixture
def rig():
    channel = f"damiao-test-{next(_channels)}"
    emulated = VirtualDamiaoMotors(channel, {IDS[n]: (IDS[n] + 0x10, MODELS[n]) for n in MODELS})
    with emulated:
        bus = DamiaoMotorBus(channel, motors(), interface="virtual", timeout_s=TIMEOUT_S, retries=1)
        yield emulated, bus
        bus.disconnect(disable_torque=False)


def test_positions_are_read_in_degrees_and_goals_reach_the_motors_with_their_gains(rig):
    emulated, bus = rig
    bus.connect()
    emulated.move(1, 45.0)
    emulated.move(8, -30.0)
    positions = bus.sync_read("Present_Position")
    assert positions["joint_1"] == pytest.approx(45.0, abs=0.05)
    assert positions["gripper"] == pytest.approx(-30.0, abs=0.05)
    assert not any(m.enabled for m in emulated.motors.values())  # the handshake moved nothing

    bus.enable_torque()
    bus.sync_write("Kp", {"joint_1": 240.0, "joint_2": 240.0, "gripper": 25.0})
    bus.write("Kd", "gripper", 0.3)
    bus.sync_write("Goal_Position", {"joint_1": 10.0, "joint_2": 90.0, "gripper": -12.5})
    command = emulated.motors[8].commands[-1]
    assert command.kp == pytest.approx(25.0, abs=0.2) and command.kd == pytest.approx(0.3, abs=0.01)
    assert bus.read("Present_Position", "joint_2") == pytest.approx(90.0, abs=0.05)
    assert bus.last_state("gripper").position == pytest.approx(-12.5, abs=0.05)


def test_a_goal_beyond_what_an_mit_frame_carries_is_refused_not_saturated(rig):
    """The frame would carry PMAX instead (the motor driven to the end of its scale)."""
    emulated, bus = rig
    bus.connect()
    bus.enable_torque()
    limit = dm.max_position_deg("dm8009")
    sent = len(emulated.motors[1].commands)
    with pytest.raises(InvalidInput, match="the goal of 'joint_1' is 1e\\+06, beyond"):
        bus.sync_write("Goal_Position", {"joint_1": 1e6})
    assert len(emulated.motors[1].commands) == sent
    bus.sync_write("Goal_Position", {"joint_1": limit})  # the scale's end itself is a goal


def test_a_disabled_motor_does_not_follow_goals_and_disconnect_disables_torque(rig):
    emulated, bus = rig
    bus.connect()
    bus.enable_torque(["joint_1"])
    bus.sync_write("Goal_Position", {"joint_1": 20.0, "joint_2": 20.0})
    assert emulated.motors[1].position == pytest.approx(20.0, abs=0.05)
    assert emulated.motors[4].position == 0.0
    bus.disconnect()
    assert not bus.is_connected and not emulated.motors[1].enabled


def test_zeroing_makes_the_present_position_zero(rig):
    emulated, bus = rig
    bus.connect()
    emulated.move(4, 33.0)
    assert bus.set_half_turn_homings(["joint_2"]) == {"joint_2": 0}
    assert bus.read("Present_Position", "joint_2") == pytest.approx(0.0, abs=0.05)


def test_parameters_are_read_by_name(rig):
    _, bus = rig
    bus.connect()
    assert bus.read("CTRL_MODE", "joint_1") == dm.MIT_MODE
    assert bus.sync_read("TMAX") == {"joint_1": 54.0, "joint_2": 28.0, "gripper": 10.0}
    assert bus.read("MST_ID", "gripper") == 0x18


def test_a_motor_that_stops_answering_is_named_with_its_ids_and_the_bus(rig):
    emulated, bus = rig
    bus.connect()
    emulated.silence(4)
    with pytest.raises(HardwareError, match=r"motor 'joint_2' \(CAN id 0x04, answers on 0x14\)"):
        bus.sync_read("Present_Position")
    with pytest.raises(
        HardwareError, match="did not answer an MIT position command after 2 tries"
    ) as caught:
        bus.sync_write("Goal_Position", {"joint_1": 1.0, "joint_2": 1.0})
    assert caught.value.where == f"CAN bus {emulated.channel}"
    assert "24 V" in caught.value.hint
    emulated.silence(4, False)
    assert set(bus.sync_read("Present_Position")) == set(MODELS)  # it answers again: fine again


def test_a_corrupted_frame_is_never_taken_for_a_state(rig):
    emulated, bus = rig
    bus.connect()
    emulated.corrupt(1)
    with pytest.raises(HardwareError, match=r"'joint_1'.*a feedback frame of 5 bytes") as caught:
        bus.read("Present_Position", "joint_1")
    assert "wiring" in caught.value.hint


def test_a_motor_reporting_a_fault_is_refused_at_once_with_the_fault_named(rig):
    emulated, bus = rig
    bus.connect()
    emulated.fault(8, 0xA)
    with pytest.raises(HardwareError, match=r"'gripper'.*reports over-current") as caught:
        bus.sync_read("Present_Position")
    assert "power-cycle" in caught.value.hint


def test_a_motor_whose_can_timeout_ran_out_connects_and_is_armed_again_by_enabling(rig):
    emulated, bus = rig
    emulated.fault(4, dm.STATE_TIMED_OUT)  # it disabled itself between two runs
    bus.connect()
    with pytest.raises(HardwareError, match="its CAN timeout ran out"):
        bus.sync_read("Present_Position")  # in use, it is a fault
    bus.enable_torque()
    assert emulated.motors[4].enabled and emulated.motors[4].status_fault is None
    assert bus.read("Present_Position", "joint_2") == pytest.approx(0.0, abs=0.05)


def test_the_handshake_names_a_missing_motor_and_releases_the_bus(rig):
    emulated, bus = rig
    emulated.silence(8)
    with pytest.raises(HardwareError, match=r"'gripper'.*handshake") as caught:
        bus.connect()
    assert "CAN wiring" in caught.value.hint
    assert not bus.is_connected


def test_the_handshake_refuses_a_motor_in_another_mode_or_of_another_model(rig):
    emulated, bus = rig
    emulated.motors[4].control_mode = 2
    with pytest.raises(HardwareError, match=r"'joint_2'.*position-velocity mode, not MIT"):
        bus.connect()
    emulated.motors[4].control_mode = dm.MIT_MODE
    emulated.motors[1].params[dm.PARAMS["TMAX"]] = 28.0  # a dm4340 where a dm8009 is declared
    with pytest.raises(HardwareError, match=r"'joint_1'.*TMAX 28, a dm8009 has 54"):
        bus.connect()
    assert not bus.is_connected


def test_bad_input_is_refused_before_anything_is_sent(rig):
    _, bus = rig
    bus.connect()
    with pytest.raises(InvalidInput, match="finite"):
        bus.sync_write("Goal_Position", {"joint_1": float("nan")})
    with pytest.raises(InvalidInput, match="no writable register 'Torque_Enable'"):
        bus.write("Torque_Enable", "joint_1", 1)
    with pytest.raises(InvalidInput, match="no motor 'elbow'"):
        bus.read("Present_Position", "elbow")
    with pytest.raises(NotSupported, match="Damiao's debugging tool"):
        bus.setup_motor("joint_1")
    with pytest.raises(InvalidInput, match="share the CAN id 0x14"):
        DamiaoMotorBus("x", motors(), recv_ids={"gripper": 0x14})
    with pytest.raises(InvalidInput, match="unknown Damiao motor model"):
        DamiaoMotorBus("x", {"a": Motor(1, "sts3215", MotorNormMode.DEGREES)})


def test_a_missing_interface_is_a_clear_error():
    bus = DamiaoMotorBus("rlctlnocan9", motors(), interface="socketcan")
    with pytest.raises(
        HardwareError, match="cannot open the CAN interface 'rlctlnocan9'"
    ) as caught:
        bus.connect()
    assert "ip link show rlctlnocan9" in caught.value.hint
    assert not bus.is_connected


def test_the_bus_is_built_by_name_through_the_registry():
    channel = f"damiao-test-{next(_channels)}"
    with VirtualDamiaoMotors(channel, {1: (0x21, "dm4310")}):
        bus = motor_bus(
            "damiao",
            {"wrist": Motor(1, "dm4310", MotorNormMode.DEGREES)},
            port=channel,
            interface="virtual",
            recv_ids={"wrist": 0x21},
            timeout_s=TIMEOUT_S,
        )
        assert isinstance(bus, DamiaoMotorBus)
        bus.connect()
        try:
            assert bus.read("ESC_ID", "wrist") == 1
        finally:
            bus.disconnect()


def test_mit_frames_and_feedback_round_trip_within_a_step_of_their_scale():
    for model, (pmax, _vmax, tmax) in dm.MODEL_LIMITS.items():
        frame = dm.encode_mit(model, 240.0, 5.0, 123.4, -50.0, 1.5)
        command = dm.decode_mit(model, frame)
        assert command.position_deg == pytest.approx(123.4, abs=360 * pmax / 65535 / 3.14)
        assert command.kp == pytest.approx(240.0, abs=0.2)
        state = dm.decode_feedback(model, 3, dm.encode_feedback(model, 3, 1, -87.0, 12.0, -0.5))
        assert state.position == pytest.approx(-87.0, abs=0.05) and state.fault is None
        assert state.torque == pytest.approx(-0.5, abs=2 * tmax / 4095)
    with pytest.raises(dm.MalformedFrame, match="for id 0x4"):
        dm.decode_feedback("dm4310", 3, dm.encode_feedback("dm4310", 4, 1, 0, 0, 0))


@pytest.mark.lerobot
def test_frames_are_packed_and_read_as_lerobots_damiao_bus_does(lerobot):
    mit = [
        [model, kp, kd, pos, vel, tau]
        for model in ("dm8009", "dm4340", "dm4310", "dmh3510")
        for kp, kd, pos, vel, tau in (
            (240.0, 5.0, 45.0, 0.0, 0.0),
            (24.0, 0.3, -123.4, 10.0, -1.0),
            (0.0, 0.0, 800.0, -9999.0, 99.0),  # past every scale: both clamp
        )
    ]
    frames = [
        [model, dm.encode_feedback(model, 1, 1, pos, vel, tau, 41, 37).hex()]
        for model in ("dm8009", "dm4310")
        for pos, vel, tau in ((0.0, 0.0, 0.0), (-87.5, 120.0, -3.25), (700.0, 1.0, 1.0))
    ]
    script = Path(__file__).with_name("lerobot_damiao_frames.py")
    theirs = lerobot(script, json.dumps({"mit": mit, "feedback": frames}), timeout=120)
    ours = [list(dm.encode_mit(*args)) for args in mit]
    assert ours == theirs["mit"]
    for (model, data), (pos, vel, tau, t_mos, t_rotor) in zip(
        frames, theirs["feedback"], strict=True
    ):
        state = dm.decode_feedback(model, 1, bytes.fromhex(data))
        assert state.position == pytest.approx(pos, abs=1e-9)
        assert state.velocity == pytest.approx(vel, abs=1e-9)
        assert state.torque == pytest.approx(tau, abs=1e-9)
        assert (state.temp_mos, state.temp_rotor) == (t_mos, t_rotor)
