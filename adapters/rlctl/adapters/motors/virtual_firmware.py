"""What the servos' firmware answers to each instruction packet, for both wire protocols.

A firmware object takes one decoded instruction packet and the motors that heard it (plugged in
and listening at the host's baud rate) and returns the status packets to send, in order, each
tagged with the id of the motor sending it so that faults can be injected per motor.
A status packet carries the id the instruction was addressed to, so a motor whose ID register
was just rewritten still answers that write under its old id, as the real ones do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from rlctl.adapters.motors import dynamixel_protocol as dxl
from rlctl.adapters.motors import feetech_protocol as scs
from rlctl.adapters.motors.virtual_motor import VirtualMotor

Reply = tuple[int, bytes]  # (motor id, encoded status packet)


class PacketReader(Protocol):
    def feed(self, data: bytes) -> list: ...


class Firmware(Protocol):
    def new_reader(self) -> PacketReader: ...

    def answer(self, packet, motors: Mapping[int, VirtualMotor]) -> list[Reply]: ...


class FeetechFirmware:
    """STS/SMS series, protocol 0."""

    def new_reader(self) -> scs.PacketReader:
        return scs.PacketReader()

    def answer(self, packet: scs.Packet, motors: Mapping[int, VirtualMotor]) -> list[Reply]:
        op, params = packet.code, packet.params
        if op == scs.Instruction.SYNC_READ:
            address, length = params[0], params[1]
            listed = [motors[i] for i in params[2:] if i in motors]
            return [self._status(m.id, m, m.read_bytes(address, length)) for m in listed]
        if op == scs.Instruction.SYNC_WRITE:
            address, _, data_by_id = scs.parse_sync_write(params)
            for motor_id, data in data_by_id.items():
                if motor_id in motors:
                    self._write(motors[motor_id], address, data)
            return []
        if packet.id == scs.BROADCAST_ID:
            if op == scs.Instruction.PING:
                return [self._status(i, motors[i], b"") for i in sorted(motors)]
            for motor in motors.values():
                self._execute(motor, op, params)
            return []
        motor = motors.get(packet.id)
        if motor is None:
            return []
        data = self._execute(motor, op, params)
        if data is None or not self._answers(motor, op):
            return []
        return [self._status(packet.id, motor, data)]

    def _execute(self, motor: VirtualMotor, op: int, params: bytes) -> bytes | None:
        if op == scs.Instruction.PING:
            return b""
        if op == scs.Instruction.READ:
            return motor.read_bytes(params[0], params[1])
        if op == scs.Instruction.WRITE:
            self._write(motor, params[0], params[1:])
            return b""
        return None  # an instruction we do not model: stay silent like a confused servo

    @staticmethod
    def _write(motor: VirtualMotor, address: int, data: bytes) -> None:
        # Feetech firmware drops writes to read-only registers without flagging an error.
        if motor.writable(address, len(data)):
            motor.write_bytes(address, data)

    @staticmethod
    def _answers(motor: VirtualMotor, op: int) -> bool:
        # Response_Status_Level 0 answers only PING and READ.
        level = motor.register("Response_Status_Level")
        return level != 0 or op in (scs.Instruction.PING, scs.Instruction.READ)

    @staticmethod
    def _status(reply_id: int, motor: VirtualMotor, data: bytes) -> Reply:
        return motor.id, scs.status(reply_id, motor.hardware_error, data)


class DynamixelFirmware:
    """X series, protocol 2.0."""

    def new_reader(self) -> dxl.PacketReader:
        return dxl.PacketReader()

    def answer(self, packet: dxl.Packet, motors: Mapping[int, VirtualMotor]) -> list[Reply]:
        op, params = packet.instruction, packet.params
        if op == dxl.Instruction.SYNC_READ:
            address, length = dxl.parse_address_length(params)
            listed = [motors[i] for i in params[4:] if i in motors]
            return [self._status(m.id, m, 0, m.read_bytes(address, length)) for m in listed]
        if op == dxl.Instruction.BULK_READ:
            requests = [(motors[i], a, n) for i, a, n in dxl.parse_bulk_read(params) if i in motors]
            return [self._status(m.id, m, 0, m.read_bytes(a, n)) for m, a, n in requests]
        if op == dxl.Instruction.SYNC_WRITE:
            address, _, data_by_id = dxl.parse_sync_write(params)
            for motor_id, data in data_by_id.items():
                if motor_id in motors:
                    self._write(motors[motor_id], address, data)
            return []
        if packet.id == dxl.BROADCAST_ID:
            if op == dxl.Instruction.PING:
                return [self._status(i, motors[i], 0, self._ping_data(motors[i])) for i in motors]
            for motor in motors.values():
                self._execute(motor, op, params)
            return []
        motor = motors.get(packet.id)
        if motor is None:
            return []
        error, data = self._execute(motor, op, params)
        if not self._answers(motor, op):
            return []
        return [self._status(packet.id, motor, error, data)]

    def _execute(self, motor: VirtualMotor, op: int, params: bytes) -> tuple[int, bytes]:
        if op == dxl.Instruction.PING:
            return 0, self._ping_data(motor)
        if op == dxl.Instruction.READ:
            address, length = dxl.parse_address_length(params)
            return 0, motor.read_bytes(address, length)
        if op == dxl.Instruction.WRITE:
            address = params[0] | (params[1] << 8)
            return self._write(motor, address, params[2:]), b""
        if op == dxl.Instruction.REBOOT:
            motor.hardware_error = 0
            return 0, b""
        return dxl.ErrorNumber.INSTRUCTION, b""

    @staticmethod
    def _write(motor: VirtualMotor, address: int, data: bytes) -> int:
        if not motor.writable(address, len(data)):
            return dxl.ErrorNumber.ACCESS
        motor.write_bytes(address, data)
        return 0

    @staticmethod
    def _ping_data(motor: VirtualMotor) -> bytes:
        number = motor.register("Model_Number")
        return bytes([number & 0xFF, number >> 8, motor.register("Firmware_Version")])

    @staticmethod
    def _answers(motor: VirtualMotor, op: int) -> bool:
        # Status_Return_Level: 0 answers PING only, 1 PING and READ, 2 everything.
        level = motor.register("Status_Return_Level")
        if op == dxl.Instruction.PING:
            return True
        return level >= 2 or (level == 1 and op == dxl.Instruction.READ)

    @staticmethod
    def _status(reply_id: int, motor: VirtualMotor, error: int, data: bytes) -> Reply:
        # A latched hardware error raises the alert bit on every status packet; its cause is in
        # Hardware_Error_Status.
        alert = dxl.ALERT if motor.hardware_error else 0
        return motor.id, dxl.status(reply_id, alert | error, data)
