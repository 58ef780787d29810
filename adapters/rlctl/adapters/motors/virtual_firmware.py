"""What the servos' firmware answers to each instruction packet, for both wire protocols.

A firmware object takes one decoded instruction packet and the motors that heard it (plugged in
and listening at the host's baud rate) and returns the status packets to send, in order, each
tagged with the id of the motor sending it so that faults can be injected per motor.
A status packet carries the id the instruction was addressed to, so a motor whose ID register
was just rewritten still answers that write under its old id, as the real ones do.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Protocol

from rlctl.adapters.motors import dynamixel_protocol as dxl
from rlctl.adapters.motors import feetech_protocol as scs
from rlctl.adapters.motors.packet_framing import BROADCAST_ID
from rlctl.adapters.motors.virtual_motor import VirtualMotor

Reply = tuple[int, bytes]  # (motor id, encoded status packet)


class PacketReader(Protocol):
    def feed(self, data: bytes) -> list: ...


class Firmware(Protocol):
    def new_reader(self) -> PacketReader: ...

    def answer(self, packet, motors: Mapping[int, VirtualMotor]) -> list[Reply]: ...


class _ServoFirmware:
    """What the two firmwares do alike. Group reads are answered motor by motor, sync writes and
    broadcasts go unanswered (except a broadcast ping), and an instruction to one motor is answered
    when the motor's status level says so. A protocol says how its packets name the instruction,
    which group reads it knows, what one instruction does and how a status packet looks."""

    protocol: ModuleType  # feetech_protocol or dynamixel_protocol

    def answer(self, packet, motors: Mapping[int, VirtualMotor]) -> list[Reply]:
        op, params = self._op(packet), packet.params
        reads = self._group_reads(op, params)
        if reads is not None:
            # Protocol 1 servos (Feetech's SCS series) know no group read: they stay silent.
            listed = [
                (motors[i], a, n)
                for i, a, n in reads
                if i in motors and motors[i].model.protocol == 0
            ]
            return [self._status(m.id, m, 0, m.read_bytes(a, n)) for m, a, n in listed]
        if op == self.protocol.Instruction.SYNC_WRITE:
            address, _, data_by_id = self.protocol.parse_sync_write(params)
            for motor_id, data in data_by_id.items():
                if motor_id in motors:
                    self._write(motors[motor_id], address, data)
            return []
        if packet.id == BROADCAST_ID:
            if op == self.protocol.Instruction.PING:
                pinged = [motors[i] for i in sorted(motors) if motors[i].model.protocol == 0]
                return [self._status(m.id, m, 0, self._ping_data(m)) for m in pinged]
            for motor in motors.values():
                self._execute(motor, op, params)
            return []
        addressed = motors.get(packet.id)
        if addressed is None:
            return []
        reply = self._execute(addressed, op, params)
        if reply is None or not self._answers(addressed, op):
            return []
        error, data = reply
        return [self._status(packet.id, addressed, error, data)]

    @staticmethod
    def _op(packet) -> int:
        raise NotImplementedError

    def _group_reads(self, op: int, params: bytes) -> list[tuple[int, int, int]] | None:
        """(motor id, address, length) per motor a group read asks; None for other ops."""
        raise NotImplementedError

    def _execute(self, motor: VirtualMotor, op: int, params: bytes) -> tuple[int, bytes] | None:
        """(error, data) to answer; None: stay silent, like a servo confused by the op."""
        raise NotImplementedError

    @staticmethod
    def _write(motor: VirtualMotor, address: int, data: bytes) -> int:
        raise NotImplementedError

    @staticmethod
    def _ping_data(motor: VirtualMotor) -> bytes:
        raise NotImplementedError

    @staticmethod
    def _answers(motor: VirtualMotor, op: int) -> bool:
        raise NotImplementedError

    @staticmethod
    def _status(reply_id: int, motor: VirtualMotor, error: int, data: bytes) -> Reply:
        raise NotImplementedError


class FeetechFirmware(_ServoFirmware):
    """STS/SMS series, protocol 0."""

    protocol = scs

    def new_reader(self) -> scs.PacketReader:
        return scs.PacketReader()

    @staticmethod
    def _op(packet: scs.Packet) -> int:
        return packet.code

    def _group_reads(self, op: int, params: bytes) -> list[tuple[int, int, int]] | None:
        if op == scs.Instruction.SYNC_READ:
            address, length = params[0], params[1]
            return [(i, address, length) for i in params[2:]]
        return None

    def _execute(self, motor: VirtualMotor, op: int, params: bytes) -> tuple[int, bytes] | None:
        if op == scs.Instruction.PING:
            return 0, b""
        if op == scs.Instruction.READ:
            return 0, motor.read_bytes(params[0], params[1])
        if op == scs.Instruction.WRITE:
            self._write(motor, params[0], params[1:])
            return 0, b""
        return None  # an instruction we do not model: stay silent like a confused servo

    @staticmethod
    def _write(motor: VirtualMotor, address: int, data: bytes) -> int:
        # Feetech firmware drops writes to read-only registers without flagging an error.
        if motor.writable(address, len(data)):
            motor.write_bytes(address, data)
        return 0

    @staticmethod
    def _ping_data(motor: VirtualMotor) -> bytes:
        return b""

    @staticmethod
    def _answers(motor: VirtualMotor, op: int) -> bool:
        # Response_Status_Level 0 answers only PING and READ.
        level = motor.register("Response_Status_Level")
        return level != 0 or op in (scs.Instruction.PING, scs.Instruction.READ)

    @staticmethod
    def _status(reply_id: int, motor: VirtualMotor, error: int, data: bytes) -> Reply:
        # The error byte reports the motor's faults; an instruction error is never flagged.
        return motor.id, scs.status(reply_id, motor.hardware_error, data)


class DynamixelFirmware(_ServoFirmware):
    """X series, protocol 2.0."""

    protocol = dxl

    def new_reader(self) -> dxl.PacketReader:
        return dxl.PacketReader()

    @staticmethod
    def _op(packet: dxl.Packet) -> int:
        return packet.instruction

    def _group_reads(self, op: int, params: bytes) -> list[tuple[int, int, int]] | None:
        if op == dxl.Instruction.SYNC_READ:
            address, length = dxl.parse_address_length(params)
            return [(i, address, length) for i in params[4:]]
        if op == dxl.Instruction.BULK_READ:
            return dxl.parse_bulk_read(params)
        return None

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
