"""Both adapters, through the real vendor SDKs, against the virtual bus (each test runs for the
Feetech and the Dynamixel family)."""

from __future__ import annotations

import time

import pytest

from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.errors import CalibrationError, HardwareError, InvalidInput

MODEL_NUMBERS = {"feetech": 777, "dynamixel": 1060}
FAULT_MARGIN_MS = 40.0


def calibration(rig, low: int = 1000, high: int = 3000) -> Calibration:
    return Calibration(
        {
            name: MotorCalibration(
                id=i, drive_mode=0, homing_offset=0, range_min=low, range_max=high
            )
            for name, i in zip(rig.names, rig.ids)
        }
    )


def wait_until(condition, timeout_s: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def assert_names(error: HardwareError, rig, motor: str, register: str) -> None:
    text = str(error)
    assert rig.virtual.port in text
    assert repr(motor) in text
    assert register in text
    assert error.hint


# Discovery


def test_ping_and_scan_find_every_motor(rig):
    assert rig.model_number == MODEL_NUMBERS[rig.family]
    assert rig.bus.ping(3) == rig.model_number
    assert rig.fault_bus().ping(42) is None
    assert rig.bus.scan() == dict.fromkeys(rig.ids, rig.model_number)


def test_scan_baudrates_finds_motors_at_their_rate(make_rig):
    rig = make_rig(ids=[1, 2], baudrate=57_600)
    bus = rig.new_bus()
    bus.connect(handshake=False)
    found = bus.scan_baudrates([1_000_000, 57_600])
    assert found == {57_600: {1: rig.model_number, 2: rig.model_number}}
    assert bus.baudrate == 1_000_000  # back where it was
    bus.disconnect(disable_torque=False)


def test_setup_motor_gives_a_factory_motor_its_id_and_the_bus_rate(make_rig):
    factory_rate = 57_600
    rig = make_rig(ids=[1], baudrate=factory_rate)
    bus = rig.new_bus()
    bus.connect(handshake=False)
    bus.setup_motor("gripper", baudrates=[1_000_000, factory_rate])
    motor = rig.virtual.motors[0]
    assert (motor.id, motor.baudrate) == (6, 1_000_000)
    assert bus.ping(6) == rig.model_number
    bus.disconnect(disable_torque=False)


def test_setup_motor_refuses_when_several_motors_answer(rig):
    with pytest.raises(HardwareError, match="several motors"):
        rig.bus.setup_motor("gripper", baudrates=[1_000_000])


# Registers


def test_write_then_read_a_register(rig):
    rig.bus.write("Return_Delay_Time", "elbow_flex", 0)
    assert rig.virtual.motor(3).register("Return_Delay_Time") == 0
    assert rig.bus.read("Return_Delay_Time", "elbow_flex") == 0
    assert rig.bus.read("Return_Delay_Time", "wrist_flex") == 250


def test_signed_registers_round_trip(rig):
    rig.bus.write("Homing_Offset", "wrist_roll", -300)
    assert rig.virtual.motor(5).register("Homing_Offset") == -300
    assert rig.bus.read("Homing_Offset", "wrist_roll") == -300


def test_sync_read_reports_each_motor(rig):
    for i in rig.ids:
        rig.virtual.motor(i).move_by_hand(1000 + 100 * i)
    positions = rig.bus.sync_read("Present_Position", normalize=False)
    assert positions == {name: 1000 + 100 * i for name, i in zip(rig.names, rig.ids)}
    assert rig.bus.sync_read("Present_Position", ["gripper"], normalize=False) == {"gripper": 1600}


def test_sync_write_reaches_every_motor(rig):
    goals = {n: 500 + i for n, i in zip(rig.names, rig.ids)}
    rig.bus.sync_write("Goal_Position", goals, normalize=False)
    # No acknowledgement comes back, so the virtual motors get it a little later.
    expected = [501, 502, 503, 504, 505, 506]
    assert wait_until(
        lambda: [rig.virtual.motor(i).register("Goal_Position") for i in rig.ids] == expected
    )


def test_positions_are_normalised_through_the_calibration(rig):
    rig.bus.write_calibration(calibration(rig, 1000, 3000))
    rig.virtual.motor(1).move_by_hand(1000)
    rig.virtual.motor(2).move_by_hand(2000)
    rig.virtual.motor(6).move_by_hand(3000)
    read = rig.bus.sync_read("Present_Position", ["shoulder_pan", "shoulder_lift", "gripper"])
    assert read == pytest.approx({"shoulder_pan": -100, "shoulder_lift": 0, "gripper": 100})
    rig.bus.write("Goal_Position", "gripper", 25.0)
    assert rig.virtual.motor(6).register("Goal_Position") == 1500


def test_calibration_lives_in_the_motors(rig):
    written = calibration(rig, 800, 3200)
    rig.bus.write_calibration(written)
    assert rig.bus.read_calibration() == written


def test_half_turn_homing_centres_the_present_position(rig):
    rig.virtual.motor(2).move_by_hand(3500)
    offsets = rig.bus.set_half_turn_homings(["shoulder_lift"])
    assert rig.bus.read("Present_Position", "shoulder_lift", normalize=False) == 2047
    assert offsets == {"shoulder_lift": 1453 if rig.family == "feetech" else -1453}


def test_normalising_without_calibration_says_what_to_do(rig):
    with pytest.raises(CalibrationError, match="no calibration") as caught:
        rig.bus.read("Present_Position", "gripper")
    assert "rlctl calibrate" in (caught.value.hint or "")


def test_unknown_motor_register_and_oversized_value_are_refused(rig):
    with pytest.raises(InvalidInput, match="no motor 'elbow'"):
        rig.bus.read("Present_Position", "elbow", normalize=False)
    with pytest.raises(InvalidInput, match="no register 'Goal_Speed'"):
        rig.bus.read("Goal_Speed", "elbow_flex")
    with pytest.raises(InvalidInput, match=r"gripper\.Return_Delay_Time"):
        rig.bus.write("Return_Delay_Time", "gripper", 300)


# Motion


def test_motors_move_towards_the_goal_only_with_torque(rig):
    goals = {n: 1000 + 200 * i for n, i in zip(rig.names, rig.ids)}
    rig.bus.sync_write("Goal_Position", goals, normalize=False)
    time.sleep(0.05)
    assert set(rig.bus.sync_read("Present_Position", normalize=False).values()) == {2048}

    rig.bus.enable_torque()
    rig.bus.sync_write("Goal_Position", goals, normalize=False)

    def arrived() -> bool:
        present = rig.bus.sync_read("Present_Position", normalize=False)
        return all(abs(present[n] - goals[n]) <= 1 for n in rig.names)

    assert wait_until(arrived)
    assert rig.bus.read("Moving", "elbow_flex") == 0


def test_disconnect_turns_torque_off(rig):
    rig.bus.enable_torque()
    assert all(rig.virtual.motor(i).torque_enabled for i in rig.ids)
    rig.bus.disconnect()
    assert not any(rig.virtual.motor(i).torque_enabled for i in rig.ids)


# Faults


def test_one_dropped_reply_is_retried(rig):
    bus = rig.fault_bus()
    rig.virtual.faults.drop_replies(3)
    assert bus.read("Present_Position", "elbow_flex", normalize=False) == 2048
    rig.virtual.faults.drop_replies(4)
    assert len(bus.sync_read("Present_Position", normalize=False)) == 6


def test_replies_lost_beyond_the_retries_name_port_motor_and_register(rig):
    bus = rig.fault_bus()
    rig.virtual.faults.drop_replies(3, count=bus.retries + 1)
    with pytest.raises(HardwareError, match="no status packet") as caught:
        bus.read("Present_Position", "elbow_flex")
    assert_names(caught.value, rig, "elbow_flex", "Present_Position")
    assert "after 3 tries" in str(caught.value)


def test_corrupt_checksums_are_reported(rig):
    rig.virtual.faults.corrupt_replies(4, count=3)
    with pytest.raises(HardwareError, match="corrupt status packet") as caught:
        rig.bus.sync_read("Present_Position", normalize=False)
    assert_names(caught.value, rig, "wrist_flex", "Present_Position")


def test_one_corrupt_reply_is_retried(rig):
    rig.virtual.faults.corrupt_replies(2)
    rig.bus.write("Goal_Position", "shoulder_lift", 1234, normalize=False)
    assert rig.virtual.motor(2).register("Goal_Position") == 1234


def test_latency_within_the_timeout_is_tolerated_beyond_it_is_not(rig):
    bus = rig.fault_bus(timeout_margin_ms=80, retries=1)
    rig.virtual.faults.latency_s = 0.002
    assert bus.read("Present_Position", "gripper", normalize=False) == 2048
    rig.virtual.faults.latency_s = 0.2
    with pytest.raises(HardwareError, match="no status packet") as caught:
        bus.read("Torque_Enable", "gripper")
    assert_names(caught.value, rig, "gripper", "Torque_Enable")


def test_an_absent_motor_fails_the_handshake_and_sync_reads(rig):
    rig.virtual.unplug(5)
    with pytest.raises(HardwareError, match=r"no answer from .*'wrist_roll' \(id 5\)"):
        rig.new_bus(timeout_margin_ms=FAULT_MARGIN_MS).connect()
    with pytest.raises(HardwareError, match="no status packet") as caught:
        rig.fault_bus().sync_read("Present_Position", normalize=False)
    assert_names(caught.value, rig, "wrist_roll", "Present_Position")
    assert rig.bus.scan() == dict.fromkeys([1, 2, 3, 4, 6], rig.model_number)


def test_hardware_error_bits_are_explained(rig):
    overload = 0x20  # the same bit on both families
    rig.virtual.motor(2).hardware_error = overload
    with pytest.raises(HardwareError, match="overload") as caught:
        rig.bus.read("Present_Position", "shoulder_lift", normalize=False)
    assert_names(caught.value, rig, "shoulder_lift", "Present_Position")
    with pytest.raises(HardwareError, match=r"'shoulder_lift'.*overload"):
        rig.bus.sync_read("Present_Position", normalize=False)


@pytest.mark.parametrize("family", ["dynamixel"])
def test_dynamixel_refuses_eeprom_writes_with_torque_on(rig):
    rig.bus.enable_torque(["elbow_flex"])
    with pytest.raises(HardwareError, match="access error") as caught:
        rig.bus.write("Operating_Mode", "elbow_flex", 1)
    assert_names(caught.value, rig, "elbow_flex", "Operating_Mode")
    assert "disable torque" in (caught.value.hint or "")


def test_a_missing_port_is_a_clear_error(rig):
    with pytest.raises(HardwareError, match="cannot open the serial port") as caught:
        rig.new_bus(port="/dev/does-not-exist").connect()
    assert "rlctl find-port" in (caught.value.hint or "")
