"""Calibration: LeRobot's JSON, ticks <-> degrees / percent, drive mode, homing, sign encodings."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.calibration import (
    Calibration,
    MotorCalibration,
    MotorNormMode,
    decode_sign_magnitude,
    decode_twos_complement,
    encode_sign_magnitude,
    encode_twos_complement,
    homing_offset_for,
    normalize,
    unnormalize,
)
from rlctl.domain.errors import CalibrationError, InvalidInput

RESOLUTION = 4096  # Feetech STS3215, Dynamixel XL330

LEROBOT_JSON = {
    "shoulder_pan": {
        "id": 1,
        "drive_mode": 0,
        "homing_offset": -1470,
        "range_min": 758,
        "range_max": 3292,
    },
    "gripper": {
        "id": 6,
        "drive_mode": 0,
        "homing_offset": 1407,
        "range_min": 2031,
        "range_max": 3476,
    },
}


ANY_DRIVE_MODE = st.sampled_from([0, 1])


@st.composite
def motors(draw, drive_mode=ANY_DRIVE_MODE):
    low = draw(st.integers(0, RESOLUTION - 2))
    high = draw(st.integers(low + 1, RESOLUTION - 1))
    return MotorCalibration(
        id=draw(st.integers(1, 253)),
        drive_mode=draw(drive_mode),
        homing_offset=draw(st.integers(-2047, 2047)),
        range_min=low,
        range_max=high,
    )


@st.composite
def motor_and_ticks(draw, **kwargs):
    motor = draw(motors(**kwargs))
    return motor, draw(st.integers(motor.range_min, motor.range_max))


def test_lerobot_json_round_trips():
    calibration = Calibration.from_data(LEROBOT_JSON)
    assert calibration["gripper"] == MotorCalibration(6, 0, 1407, 2031, 3476)
    assert list(calibration) == ["shoulder_pan", "gripper"]
    assert calibration.to_data() == LEROBOT_JSON
    assert json.loads(calibration.to_json()) == LEROBOT_JSON
    assert Calibration.from_json(calibration.to_json()) == calibration
    assert list(calibration.to_data()["gripper"]) == [
        "id",
        "drive_mode",
        "homing_offset",
        "range_min",
        "range_max",
    ]


@given(motor_and_ticks())
def test_ticks_to_degrees_and_back_within_one_tick(data):
    motor, ticks = data
    degrees = normalize(ticks, motor, MotorNormMode.DEGREES, RESOLUTION)
    assert abs(unnormalize(degrees, motor, MotorNormMode.DEGREES, RESOLUTION) - ticks) <= 1


@pytest.mark.parametrize("mode", [MotorNormMode.RANGE_M100_100, MotorNormMode.RANGE_0_100])
@given(data=motor_and_ticks())
def test_ticks_to_percent_and_back_within_one_tick(mode, data):
    motor, ticks = data
    value = normalize(ticks, motor, mode, RESOLUTION)
    low, high = (-100, 100) if mode is MotorNormMode.RANGE_M100_100 else (0, 100)
    assert low <= value <= high
    assert abs(unnormalize(value, motor, mode, RESOLUTION) - ticks) <= 1


def test_range_ends_and_middle():
    motor = MotorCalibration(1, 0, 0, 1000, 3000)
    assert normalize(1000, motor, MotorNormMode.RANGE_M100_100, RESOLUTION) == -100
    assert normalize(3000, motor, MotorNormMode.RANGE_M100_100, RESOLUTION) == 100
    assert normalize(2000, motor, MotorNormMode.RANGE_0_100, RESOLUTION) == 50
    assert normalize(2000, motor, MotorNormMode.DEGREES, RESOLUTION) == 0
    assert normalize(2000 + 4095 / 4, motor, MotorNormMode.DEGREES, RESOLUTION) == pytest.approx(90)
    assert unnormalize(0.0, motor, MotorNormMode.RANGE_M100_100, RESOLUTION) == 2000
    # LeRobot truncates with int(): 90 degrees is 1023.75 ticks from the middle.
    assert unnormalize(90.0, motor, MotorNormMode.DEGREES, RESOLUTION) == 3023


def test_ranges_modes_clamp_and_degrees_does_not():
    motor = MotorCalibration(1, 0, 0, 1000, 3000)
    assert normalize(0, motor, MotorNormMode.RANGE_M100_100, RESOLUTION) == -100
    assert normalize(4000, motor, MotorNormMode.RANGE_0_100, RESOLUTION) == 100
    assert unnormalize(250.0, motor, MotorNormMode.RANGE_M100_100, RESOLUTION) == 3000
    assert unnormalize(-5.0, motor, MotorNormMode.RANGE_0_100, RESOLUTION) == 1000
    assert normalize(0, motor, MotorNormMode.DEGREES, RESOLUTION) < -170
    assert unnormalize(-180.0, motor, MotorNormMode.DEGREES, RESOLUTION) < 1000


@given(motor_and_ticks(drive_mode=st.just(1)))
def test_drive_mode_mirrors_percent_but_not_degrees(data):
    inverted, ticks = data
    plain = MotorCalibration(
        inverted.id, 0, inverted.homing_offset, inverted.range_min, inverted.range_max
    )
    m100, p100, deg = MotorNormMode.RANGE_M100_100, MotorNormMode.RANGE_0_100, MotorNormMode.DEGREES
    assert normalize(ticks, inverted, m100, RESOLUTION) == -normalize(
        ticks, plain, m100, RESOLUTION
    )
    assert normalize(ticks, inverted, p100, RESOLUTION) == 100 - normalize(
        ticks, plain, p100, RESOLUTION
    )
    assert normalize(ticks, inverted, deg, RESOLUTION) == normalize(ticks, plain, deg, RESOLUTION)
    # The bus can switch drive mode off (LeRobot's Dynamixel bus does).
    assert normalize(ticks, inverted, m100, RESOLUTION, apply_drive_mode=False) == normalize(
        ticks, plain, m100, RESOLUTION
    )
    for mode in (m100, p100):
        value = normalize(ticks, inverted, mode, RESOLUTION)
        assert abs(unnormalize(value, inverted, mode, RESOLUTION) - ticks) <= 1


def test_bad_ranges_name_the_motor():
    with pytest.raises(CalibrationError) as info:
        Calibration.from_data(
            {**LEROBOT_JSON, "elbow_flex": {**LEROBOT_JSON["gripper"], "range_min": 3476}}
        )
    assert info.value.where == "elbow_flex"
    assert "range_min" in str(info.value)
    flat = MotorCalibration(3, 0, 0, 2000, 2000)
    with pytest.raises(CalibrationError) as info:
        normalize(2000, flat, MotorNormMode.DEGREES, RESOLUTION, motor="wrist_roll")
    assert info.value.where == "wrist_roll"
    with pytest.raises(CalibrationError, match="below"):
        unnormalize(
            0.0, MotorCalibration(3, 0, 0, 3000, 1000), MotorNormMode.RANGE_0_100, RESOLUTION
        )


def test_missing_motors_and_fields_are_reported():
    calibration = Calibration.from_data(LEROBOT_JSON)
    with pytest.raises(CalibrationError, match="shoulder_pan, gripper") as info:
        calibration.require(["shoulder_pan", "wrist_flex"])
    assert info.value.where == "wrist_flex"
    assert info.value.hint
    with pytest.raises(CalibrationError, match="range_max") as info:
        Calibration.from_data(
            {"gripper": {"id": 6, "drive_mode": 0, "homing_offset": 0, "range_min": 1}}
        )
    assert info.value.where == "gripper"
    with pytest.raises(CalibrationError) as info:
        Calibration.from_data({"gripper": {**LEROBOT_JSON["gripper"], "id": "six"}})
    assert info.value.where == "gripper.id"
    with pytest.raises(CalibrationError, match="JSON"):
        Calibration.from_json("{not json")


def test_calibration_methods_use_the_named_motor():
    calibration = Calibration.from_data(LEROBOT_JSON)
    mode = MotorNormMode.RANGE_M100_100
    assert calibration.normalize("gripper", 2031, mode, RESOLUTION) == -100
    assert calibration.unnormalize("gripper", 100.0, mode, RESOLUTION) == 3476
    with pytest.raises(CalibrationError):
        calibration.normalize("elbow", 0, mode, RESOLUTION)


@given(st.integers(0, RESOLUTION - 1))
def test_homing_offset_puts_the_present_position_at_half_a_turn(present):
    half_turn = (RESOLUTION - 1) // 2
    feetech = homing_offset_for(present, RESOLUTION)
    assert feetech == present - 2047
    assert present - feetech == half_turn  # Feetech reads actual - offset
    dynamixel = homing_offset_for(present, RESOLUTION, offset_is_added=True)
    assert present + dynamixel == half_turn  # Dynamixel reads actual + offset


@given(st.integers(-2047, 2047), st.sampled_from([11, 15]))
def test_sign_magnitude_round_trips(value, sign_bit):
    encoded = encode_sign_magnitude(value, sign_bit)
    assert 0 <= encoded < 1 << (sign_bit + 1)
    assert decode_sign_magnitude(encoded, sign_bit) == value


def test_sign_magnitude_known_values_and_overflow():
    assert encode_sign_magnitude(5, 11) == 5
    assert encode_sign_magnitude(-5, 11) == 2048 + 5
    assert decode_sign_magnitude(2048 + 5, 11) == -5
    with pytest.raises(InvalidInput, match="exceeds 2047"):
        encode_sign_magnitude(2048, 11)


@given(st.integers(-(2**31), 2**31 - 1))
def test_twos_complement_round_trips(value):
    encoded = encode_twos_complement(value, 4)
    assert 0 <= encoded < 2**32
    assert decode_twos_complement(encoded, 4) == value


def test_twos_complement_known_values_and_overflow():
    assert encode_twos_complement(-1, 2) == 0xFFFF
    assert decode_twos_complement(0x8000, 2) == -32768
    with pytest.raises(InvalidInput):
        encode_twos_complement(40000, 2)


@given(motors())
def test_every_valid_motor_survives_json(motor):
    calibration = Calibration({"joint": motor})
    assert Calibration.from_json(calibration.to_json()) == calibration
