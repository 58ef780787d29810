"""The in-memory motor bus, and every MotorBus adapter against the port's shape."""

from __future__ import annotations

import inspect

import pytest

from rlctl.adapters.memory.motor_bus import InMemoryMotorBus
from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.application.ports.motors import MotorBus
from rlctl.domain.calibration import Calibration, MotorCalibration, MotorNormMode
from rlctl.domain.errors import CalibrationError, HardwareError, InvalidInput
from rlctl.domain.motors import Motor

MOTORS = {
    "elbow": Motor(1, "sts3215", MotorNormMode.RANGE_M100_100),
    "gripper": Motor(2, "sts3215", MotorNormMode.RANGE_0_100),
}
CALIBRATION = Calibration(
    {name: MotorCalibration(m.id, 0, 0, 1000, 3000) for name, m in MOTORS.items()}
)


def port_members() -> set[str]:
    return {name for name in MotorBus.__protocol_attrs__ if not name.startswith("_")}


@pytest.mark.parametrize("adapter", [FeetechMotorBus, DynamixelMotorBus, InMemoryMotorBus])
def test_adapters_offer_every_member_of_the_port(adapter):
    missing = {name for name in port_members() if not hasattr(adapter, name)}
    missing -= {"calibration"}  # an instance attribute, checked below
    assert not missing
    for name in port_members() - {"calibration"}:
        port_member = getattr(MotorBus, name)
        if inspect.isfunction(port_member):
            expected = list(inspect.signature(port_member).parameters)
            assert list(inspect.signature(getattr(adapter, name)).parameters) == expected, name


def test_fake_follows_goals_with_torque_and_normalises():
    bus = InMemoryMotorBus(MOTORS, CALIBRATION)
    bus.connect()
    bus.move_by_hand("elbow", 2000)
    bus.move_by_hand("gripper", 2000)
    bus.sync_write("Goal_Position", {"elbow": 0.0, "gripper": 100.0})
    assert bus.sync_read("Present_Position") == {"elbow": 0.0, "gripper": 50.0}  # torque off
    bus.enable_torque()
    bus.sync_write("Goal_Position", {"elbow": 50.0, "gripper": 100.0})
    assert bus.sync_read("Present_Position") == pytest.approx({"elbow": 50.0, "gripper": 100.0})
    assert bus.read("Present_Position", "gripper", normalize=False) == 3000
    assert ("write", "Goal_Position", ("elbow", "gripper")) in bus.calls


def test_fake_scripts_failures_and_absent_motors():
    bus = InMemoryMotorBus(MOTORS)
    bus.fail_next(HardwareError("scripted", where=bus.port))
    with pytest.raises(HardwareError, match="scripted"):
        bus.read("Present_Position", "elbow", normalize=False)
    bus.unplug("gripper")
    with pytest.raises(HardwareError, match="'gripper'"):
        bus.sync_read("Present_Position", normalize=False)
    assert bus.scan() == {1: 777}
    with pytest.raises(CalibrationError):
        bus.read("Present_Position", "elbow")


def test_fake_keeps_calibration_like_the_motors():
    bus = InMemoryMotorBus(MOTORS)
    bus.move_by_hand("elbow", 3000)
    assert bus.set_half_turn_homings(["elbow"]) == {"elbow": 3000 - 2047}
    assert bus.read("Present_Position", "elbow", normalize=False) == 2047
    bus.write_calibration(CALIBRATION)
    assert bus.read_calibration() == CALIBRATION


@pytest.mark.parametrize("bad_id", [-1, 253, 254, True, 1.0])
def test_motor_ids_are_checked(bad_id):
    with pytest.raises(InvalidInput, match="motor id"):
        Motor(bad_id, "sts3215", MotorNormMode.DEGREES)
