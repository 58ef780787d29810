"""Feetech servos through feetech-servo-sdk over pyserial: the STS/SMS series (SO-100/SO-101
arms, protocol 0) and the SCS series (the Hope JR hand's SCS0009, protocol 1).

Protocol 1, as LeRobot drives it: words big-endian, no sync read (each motor is read in turn),
no broadcast ping (a scan pings every id), no homing offset (calibrations hold 0 there)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import scservo_sdk as scs

from rlctl.adapters.motors import feetech_protocol
from rlctl.adapters.motors.feetech_protocol import StatusError
from rlctl.adapters.motors.serial_bus import SerialServoBus
from rlctl.adapters.motors.tables import Family
from rlctl.adapters.motors.waiting_port import WaitingReads
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.motors import Motor

_PROTOCOL_END = 0  # STS/SMS: little-endian words (the SDK keeps this in a module global)
_PHASE_ANGLE_FEEDBACK_BIT = 0x10

_STATUS_HINTS = {
    StatusError.VOLTAGE: (
        "an input voltage error",
        "check the power supply: its voltage must lie between the motor's Min_Voltage_Limit "
        "and Max_Voltage_Limit",
    ),
    StatusError.ANGLE: (
        "an angle sensor error",
        "power-cycle the motor; if it stays, its position sensor is faulty",
    ),
    StatusError.OVERHEAT: ("overheating", "let the motor cool down and lighten its load"),
    StatusError.OVERELE: (
        "an overcurrent",
        "free the joint or lower Torque_Limit, then power-cycle the motor",
    ),
    StatusError.OVERLOAD: (
        "an overload",
        "free the blocked joint, then power-cycle the motor to clear the error",
    ),
}


class FeetechPortHandler(WaitingReads, scs.PortHandler):
    """The PyPI SDK's reply timeout is too short for real motors (LeRobot patches it the same
    way: https://gitee.com/ftservo/SCServoSDK/issues/IBY2S6); here the margin is a setting."""

    def __init__(self, port: str, timeout_margin_ms: float) -> None:
        super().__init__(port)
        self.timeout_margin_ms = timeout_margin_ms

    def setPacketTimeout(self, packet_length: int) -> None:  # noqa: N802 (the SDK's name)
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = self.tx_time_per_byte * (packet_length + 3) + self.timeout_margin_ms


class FeetechMotorBus(SerialServoBus):
    family = Family.FEETECH
    sdk = scs
    apply_drive_mode = True
    homing_offset_is_added = False
    broadcast_status_length = 6
    default_timeout_margin_ms = 50.0

    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(port, motors, calibration, **settings)
        self.protocol = 1 if self._byteorder == "big" else 0
        if self.protocol == 1:  # no sync read: every motor is read on its own
            self._solo_reads = frozenset(self._motors)

    def _new_port_handler(self, port: str, timeout_margin_ms: float) -> Any:
        return FeetechPortHandler(port, timeout_margin_ms)

    def _new_packet_handler(self) -> Any:
        return scs.PacketHandler(_PROTOCOL_END)

    def _describe_status(self, error: int, motor_id: int) -> tuple[str, str] | None:
        flags = [flag for flag in _STATUS_HINTS if error & flag]
        if not flags:
            return None
        causes = " and ".join(_STATUS_HINTS[flag][0] for flag in flags)
        return causes, _STATUS_HINTS[flags[0]][1]

    def ping(self, motor_id: int) -> int | None:
        # The SDK decodes the model number little-endian (its module-wide protocol 0, which
        # this bus keeps so that an STS bus in the same process is not switched over).
        number = super().ping(motor_id)
        return number if number is None else self._ordered(number, 2)

    def scan(self) -> dict[int, int]:
        if self.protocol == 0:
            return super().scan()
        # Protocol 1 has no broadcast ping: every id is asked in turn, as LeRobot does.
        found = {}
        for motor_id in range(feetech_protocol.MAX_ID + 1):
            number = self._transport.read_once(motor_id, 3, 2)  # Model_Number
            if number is not None:
                found[motor_id] = self._ordered(number, 2)
        return found

    def read_calibration(self) -> Calibration:
        if self.protocol == 0:
            return super().read_calibration()
        return Calibration(
            {
                name: MotorCalibration(
                    id=motor.id,
                    drive_mode=0,
                    homing_offset=0,  # protocol 1 keeps none (LeRobot reads 0)
                    range_min=int(self.read("Min_Position_Limit", name, normalize=False)),
                    range_max=int(self.read("Max_Position_Limit", name, normalize=False)),
                )
                for name, motor in self._motors.items()
            }
        )

    def write_calibration(self, calibration: Calibration) -> None:
        if self.protocol == 0:
            super().write_calibration(calibration)
            return
        names = self._names(calibration)
        self.disable_torque(names)
        for name in names:
            self.write("Min_Position_Limit", name, calibration[name].range_min, normalize=False)
            self.write("Max_Position_Limit", name, calibration[name].range_max, normalize=False)
        self.calibration = calibration

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        if self.protocol == 0:
            super().reset_calibration(motors)
            return
        names = self._names(motors)
        for name in names:
            self.write("Min_Position_Limit", name, 0, normalize=False)
            full_turn = self._models[name].resolution - 1
            self.write("Max_Position_Limit", name, full_turn, normalize=False)
        if self.calibration is not None:
            kept = {k: v for k, v in self.calibration.motors.items() if k not in names}
            self.calibration = Calibration(kept) if kept else None

    def _broadcast_ping_packet(self) -> bytes:
        return feetech_protocol.instruction(
            feetech_protocol.BROADCAST_ID, feetech_protocol.Instruction.PING
        )

    def _parse_ping_replies(self, data: bytes) -> dict[int, int | None]:
        # A Feetech ping reply carries no model number: it is read afterwards.
        return {packet.id: None for packet in feetech_protocol.PacketReader().feed(data)}

    def _torque_writes(self, enable: bool) -> list[tuple[str, int]]:
        # Lock guards the EEPROM: released with the torque so ids, offsets and limits can be set.
        return [("Torque_Enable", int(enable)), ("Lock", int(enable))]

    def _drive_mode(self, motor: str) -> int:
        return 0  # no drive-mode register: LeRobot reads 0 too

    def configure_motors(self) -> None:
        """LeRobot's settings; leaves torque off. Replies come at once (the factory waits
        500 µs), acceleration is the fastest, and the STS3215 reports positions within one turn."""
        self.disable_torque()
        for name, motor in self.motors.items():
            self.write("Return_Delay_Time", name, 0)
            if self.protocol == 0:  # the SCS series has no such register
                self.write("Maximum_Acceleration", name, 254)
            self.write("Acceleration", name, 254)
            if motor.model == "sts3215":
                phase = int(self.read("Phase", name))
                if phase & _PHASE_ANGLE_FEEDBACK_BIT:
                    self.write("Phase", name, phase & ~_PHASE_ANGLE_FEEDBACK_BIT)
