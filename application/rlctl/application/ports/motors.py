"""A bus of serial servos (Feetech, Dynamixel): registers by name, for motors by name.

Registers are named as in LeRobot's control tables (`Present_Position`, `Goal_Position`,
`Torque_Enable`, `Operating_Mode`, `Homing_Offset`, …). Position registers are normalised through
the bus's calibration (degrees, -100..100, 0..100 by the motor's norm mode) unless
`normalize=False`; every other register, and positions with `normalize=False`, are integers with
their sign decoded. Failures to communicate raise `rlctl.domain.errors.HardwareError` naming the
port, the motor and the register; a missing calibration raises `CalibrationError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from rlctl.domain.calibration import Calibration
from rlctl.domain.motors import Motor

MotorValue = int | float


class MotorBus(Protocol):
    @property
    def port(self) -> str:
        """The serial device (`/dev/ttyACM0`, a virtual bus's pseudo-terminal)."""

    @property
    def motors(self) -> Mapping[str, Motor]:
        """Motor name -> description, in the robot's order."""

    @property
    def is_connected(self) -> bool: ...

    @property
    def baudrate(self) -> int: ...

    calibration: Calibration | None
    """The calibration positions are normalised through; `None` until set or read."""

    def connect(self, *, handshake: bool = True) -> None:
        """Open the port; with `handshake`, check every motor answers with its expected model."""

    def disconnect(self, *, disable_torque: bool = True) -> None: ...

    def set_baudrate(self, baudrate: int) -> None:
        """Change the host side's baud rate (the motors keep theirs)."""

    # Registers

    def read(self, register: str, motor: str, *, normalize: bool = True) -> MotorValue: ...

    def write(
        self, register: str, motor: str, value: MotorValue, *, normalize: bool = True
    ) -> None:
        """Write and wait for the motor's acknowledgement."""

    def sync_read(
        self, register: str, motors: Sequence[str] | None = None, *, normalize: bool = True
    ) -> dict[str, MotorValue]:
        """One instruction, one answer per motor (all motors when `motors` is None)."""

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        """One instruction, no acknowledgement: the fast path for control loops."""

    def enable_torque(self, motors: Iterable[str] | None = None) -> None: ...

    def configure_motors(self) -> None:
        """LeRobot's recommended settings: no return delay, the fastest acceleration."""

    def disable_torque(self, motors: Iterable[str] | None = None) -> None: ...

    # Discovery

    def ping(self, motor_id: int) -> int | None:
        """The model number of the motor answering at `motor_id`, or None when none answers."""

    def scan(self) -> dict[int, int]:
        """Motor id -> model number of every motor answering at the current baud rate."""

    def scan_baudrates(self, baudrates: Iterable[int] | None = None) -> dict[int, dict[int, int]]:
        """Baud rate -> {id: model number} for every rate (default: all the family's rates) where
        some motor answers a broadcast ping. The port is left at the rate it was at."""

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        """Find the one motor connected (at any baud rate), check its model, and give it the id of
        `motor` and the bus's baud rate."""

    # Calibration kept in the motors' EEPROM

    def read_calibration(self) -> Calibration:
        """Homing offsets and position limits as the motors hold them."""

    def write_calibration(self, calibration: Calibration) -> None:
        """Write offsets and limits to the motors (torque off) and use `calibration` from now on."""

    def reset_calibration(self, motors: Iterable[str] | None = None) -> None:
        """Zero the homing offsets and open the limits to the full turn."""

    def set_half_turn_homings(self, motors: Iterable[str] | None = None) -> dict[str, int]:
        """Write the homing offsets that make the present positions read half a turn."""
