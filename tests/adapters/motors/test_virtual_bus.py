"""The virtual bus as the vendor SDKs see it: firmware answers, baud rates, the motor model."""

from __future__ import annotations

import dynamixel_sdk as dxl
import pytest
import scservo_sdk as scs

from rlctl.adapters.motors import dynamixel_protocol, feetech_protocol
from rlctl.adapters.motors.dynamixel import DynamixelPortHandler
from rlctl.adapters.motors.feetech import FeetechPortHandler
from rlctl.adapters.motors.tables import servo_model
from rlctl.adapters.motors.virtual_motor import VirtualMotor

STS = servo_model("sts3215")
XL = servo_model("xl430-w250")


# The SDKs' own 34 ms wait is short on a loaded machine: their PortHandlers with a wider margin.
PORT_HANDLERS = {scs: FeetechPortHandler, dxl: DynamixelPortHandler}


def open_port(sdk, port: str, baudrate: int = 1_000_000):
    handler = PORT_HANDLERS[sdk](port, timeout_margin_ms=100)
    handler.baudrate = baudrate
    assert handler.openPort()
    return handler


@pytest.mark.parametrize("family", ["feetech"])
def test_feetech_sdk_reads_writes_and_sync_reads(make_virtual):
    virtual = make_virtual(ids=[1, 2])
    port, packets = open_port(scs, virtual.port), scs.PacketHandler(0)
    assert packets.ping(port, 2) == (777, scs.COMM_SUCCESS, 0)
    assert packets.write2ByteTxRx(port, 2, 9, 1234) == (scs.COMM_SUCCESS, 0)  # Min_Position_Limit
    assert packets.read2ByteTxRx(port, 2, 9) == (1234, scs.COMM_SUCCESS, 0)
    reader = scs.GroupSyncRead(port, packets, 56, 2)
    for motor_id in (1, 2):
        reader.addParam(motor_id)
    assert reader.txRxPacket() == scs.COMM_SUCCESS
    assert [reader.getData(i, 56, 2) for i in (1, 2)] == [2048, 2048]
    port.closePort()


@pytest.mark.parametrize("family", ["dynamixel"])
def test_dynamixel_sdk_pings_reads_and_bulk_reads(make_virtual):
    virtual = make_virtual(ids=[1, 2])
    port, packets = open_port(dxl, virtual.port), dxl.PacketHandler(2.0)
    assert packets.ping(port, 1) == (1060, dxl.COMM_SUCCESS, 0)
    assert packets.write4ByteTxRx(port, 1, 20, 2**32 - 5) == (dxl.COMM_SUCCESS, 0)  # offset -5
    assert virtual.motor(1).register("Homing_Offset") == -5
    bulk = dxl.GroupBulkRead(port, packets)
    bulk.addParam(1, 132, 4)
    bulk.addParam(2, 7, 1)
    assert bulk.txRxPacket() == dxl.COMM_SUCCESS
    assert (bulk.getData(1, 132, 4), bulk.getData(2, 7, 1)) == (2048 - 5, 2)
    port.closePort()


@pytest.mark.parametrize("family", ["dynamixel"])
def test_status_return_level_silences_write_acknowledgements(make_virtual):
    virtual = make_virtual(ids=[1])
    virtual.motor(1).set_register("Status_Return_Level", 1)
    port, packets = open_port(dxl, virtual.port), dxl.PacketHandler(2.0)
    assert packets.write1ByteTxRx(port, 1, 65, 1)[0] == dxl.COMM_RX_TIMEOUT
    assert packets.read1ByteTxRx(port, 1, 65) == (1, dxl.COMM_SUCCESS, 0)  # written all the same
    port.closePort()


def test_motors_hear_only_their_baud_rate(make_virtual, family):
    virtual = make_virtual(ids=[1], baudrate=57_600)
    sdk = scs if family == "feetech" else dxl
    packets = scs.PacketHandler(0) if family == "feetech" else dxl.PacketHandler(2.0)
    port = open_port(sdk, virtual.port, 1_000_000)
    assert packets.ping(port, 1)[1] == sdk.COMM_RX_TIMEOUT
    port.setBaudRate(57_600)
    assert packets.ping(port, 1)[1] == sdk.COMM_SUCCESS
    port.closePort()


def test_a_new_id_answers_the_write_under_the_old_one(make_virtual, family):
    virtual = make_virtual(ids=[1])
    sdk = scs if family == "feetech" else dxl
    packets = scs.PacketHandler(0) if family == "feetech" else dxl.PacketHandler(2.0)
    id_address = (STS if family == "feetech" else XL).register("ID").address
    port = open_port(sdk, virtual.port)
    assert packets.write1ByteTxRx(port, 1, id_address, 9) == (sdk.COMM_SUCCESS, 0)
    assert packets.ping(port, 9)[1] == sdk.COMM_SUCCESS
    assert packets.ping(port, 1)[1] == sdk.COMM_RX_TIMEOUT
    port.closePort()


def test_status_packets_carry_hardware_errors():
    motor = VirtualMotor(XL, 1, baudrate=1_000_000)
    motor.hardware_error = 0x20
    assert motor.register("Hardware_Error_Status") == 0x20
    assert dynamixel_protocol.ALERT == 0x80


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("model", [STS, XL])
def test_shaft_relaxes_towards_the_goal_with_its_time_constant(model):
    clock = ManualClock()
    motor = VirtualMotor(model, 1, baudrate=1_000_000, shaft=1000, tau_s=0.1, clock=clock)
    motor.set_register("Goal_Position", 3000)
    clock.now = 1.0
    assert motor.shaft == 1000  # torque off: nothing moves
    motor.set_register("Torque_Enable", 1)
    assert motor.register("Goal_Position") == 1000  # torque on holds where it is
    motor.set_register("Goal_Position", 3000)
    clock.now = 1.1  # one time constant: 63 % of the way
    assert motor.shaft == pytest.approx(1000 + 2000 * 0.632, abs=1)
    clock.now = 2.0
    assert motor.register("Present_Position") == 3000
    assert motor.register("Moving") == 0


def test_homing_offset_shifts_the_reported_position_as_each_vendor_does():
    feetech = VirtualMotor(STS, 1, baudrate=1_000_000, shaft=100)
    feetech.set_register("Homing_Offset", 300)
    assert feetech.register("Present_Position") == 4096 - 200  # shaft - offset, one turn
    dynamixel = VirtualMotor(XL, 1, baudrate=1_000_000, shaft=100)
    dynamixel.set_register("Homing_Offset", 300)
    assert dynamixel.register("Present_Position") == 400  # shaft + offset


@pytest.mark.parametrize("family", ["feetech"])
def test_a_malformed_instruction_leaves_the_bus_serving(make_virtual):
    virtual = make_virtual(ids=[1])
    port, packets = open_port(scs, virtual.port), scs.PacketHandler(0)
    truncated_read = feetech_protocol.instruction(1, feetech_protocol.Instruction.READ, b"\x38")
    port.writePort(truncated_read)
    assert packets.ping(port, 1) == (777, scs.COMM_SUCCESS, 0)
    port.closePort()
