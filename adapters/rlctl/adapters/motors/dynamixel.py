"""Dynamixel X-series servos (Koch, ALOHA arms): dynamixel-sdk, Protocol 2.0, over pyserial."""

from __future__ import annotations

from typing import Any

import dynamixel_sdk as dxl

from rlctl.adapters.motors import dynamixel_protocol
from rlctl.adapters.motors.dynamixel_protocol import ALERT, ErrorNumber
from rlctl.adapters.motors.serial_bus import SerialServoBus
from rlctl.adapters.motors.tables import Family
from rlctl.adapters.motors.waiting_port import WaitingReads

PROTOCOL_VERSION = 2.0
_SDK_LATENCY_MARGIN_MS = 34.0  # the SDK's LATENCY_TIMER * 2 + 2

_HARDWARE_ERROR_BITS = {
    0x01: "an input voltage error",
    0x04: "overheating",
    0x08: "a motor encoder error",
    0x10: "an electrical shock",
    0x20: "an overload",
}
_INSTRUCTION_ERRORS: dict[int, tuple[str, str]] = {
    ErrorNumber.ACCESS: (
        "an access error (a read-only register, or an EEPROM register while torque is on)",
        "disable torque before writing EEPROM registers (ID, Baud_Rate, Operating_Mode, "
        "Drive_Mode, Homing_Offset, limits)",
    ),
    ErrorNumber.DATA_RANGE: ("a value out of the register's range", "check the value written"),
    ErrorNumber.DATA_LIMIT: ("a value beyond the register's limit", "check the value written"),
    ErrorNumber.DATA_LENGTH: ("a data length error", "check the register's size"),
    ErrorNumber.CRC: (
        "a CRC error in the instruction it received",
        "check the cable and the power supply",
    ),
    ErrorNumber.INSTRUCTION: ("an unknown instruction", "check the protocol version (2.0)"),
    ErrorNumber.RESULT_FAIL: ("a failure to process the instruction", "retry"),
}


class DynamixelPortHandler(WaitingReads, dxl.PortHandler):
    """The SDK's port with the reply-timeout margin as a setting."""

    def __init__(self, port: str, timeout_margin_ms: float) -> None:
        super().__init__(port)
        self.timeout_margin_ms = timeout_margin_ms

    def setPacketTimeout(self, packet_length: int) -> None:  # noqa: N802 (the SDK's name)
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = self.tx_time_per_byte * packet_length + self.timeout_margin_ms


class DynamixelMotorBus(SerialServoBus):
    family = Family.DYNAMIXEL
    sdk = dxl
    apply_drive_mode = False  # LeRobot leaves direction to the Drive_Mode register
    homing_offset_is_added = True
    broadcast_status_length = 14
    default_timeout_margin_ms = _SDK_LATENCY_MARGIN_MS

    def _new_port_handler(self, port: str, timeout_margin_ms: float) -> Any:
        return DynamixelPortHandler(port, timeout_margin_ms)

    def _new_packet_handler(self) -> Any:
        return dxl.PacketHandler(PROTOCOL_VERSION)

    def _describe_status(self, error: int, motor_id: int) -> tuple[str, str] | None:
        number = error & ~ALERT
        if number:
            unknown = (f"error number {number}", "see the ROBOTIS e-Manual, Protocol 2.0 status")
            return _INSTRUCTION_ERRORS.get(number, unknown)  # IntEnum keys match plain ints
        if error & ALERT:
            return self._hardware_error(motor_id), (
                "the motor keeps torque off until rebooted: remove the cause, then power-cycle "
                "it (or reboot it through the SDK)"
            )
        return None

    def _hardware_error(self, motor_id: int) -> str:
        # The alert bit only says that something is wrong; the register says what.
        register = self._family_models()[0].register("Hardware_Error_Status")
        bits = self._transport.read_once(motor_id, register.address, register.size)
        causes = [text for bit, text in _HARDWARE_ERROR_BITS.items() if bits and bits & bit]
        if not causes:
            return "a hardware error (alert bit set)"
        return "a hardware error: " + " and ".join(causes)

    def _broadcast_ping_packet(self) -> bytes:
        return dynamixel_protocol.instruction(
            dynamixel_protocol.BROADCAST_ID, dynamixel_protocol.Instruction.PING
        )

    def _parse_ping_replies(self, data: bytes) -> dict[int, int | None]:
        replies: dict[int, int | None] = {}
        for packet in dynamixel_protocol.PacketReader().feed(data):
            if (
                packet.instruction == dynamixel_protocol.Instruction.STATUS
                and len(packet.data) >= 2
            ):
                replies[packet.id] = packet.data[0] | (packet.data[1] << 8)
        return replies

    def _torque_writes(self, enable: bool) -> list[tuple[str, int]]:
        return [("Torque_Enable", int(enable))]

    def _drive_mode(self, motor: str) -> int:
        return int(self.read("Drive_Mode", motor, normalize=False))

    def configure_motors(self) -> None:
        """LeRobot's setting; leaves torque off: replies come at once (the factory waits 500 µs)."""
        self.disable_torque()
        for name in self.motors:
            self.write("Return_Delay_Time", name, 0)
