"""One simulated servo: its control-table memory and a first-order model of its shaft.

The shaft position (`shaft`, in encoder ticks) relaxes towards the goal with time constant `tau`
while torque is on in a position mode; with torque off it stays put unless moved by hand
(`move_by_hand`); in velocity mode (a LeKiwi's wheels) it turns at the goal velocity. Motion is
integrated lazily, from the time elapsed since the last look, so no
thread ticks in the background. The homing offset relates shaft and register as on the real
motors: Feetech reports `shaft - offset` (wrapped to one turn), Dynamixel `shaft + offset`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from rlctl.adapters.motors.tables import Family, ServoModel

_MEMORY_SIZE = 256  # every register we model sits below this address on both families
_POSITION_MODES = {Family.FEETECH: {0}, Family.DYNAMIXEL: {3, 4, 5}}
# Velocity mode: the shaft turns at Goal_Velocity (ticks per second here) while torque is on.
_VELOCITY_MODES = {Family.FEETECH: {1}, Family.DYNAMIXEL: {1}}
_MOVING_THRESHOLD_TICKS = 2.0


class VirtualMotor:
    def __init__(
        self,
        model: ServoModel,
        motor_id: int,
        *,
        baudrate: int,
        shaft: float | None = None,
        tau_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.tau_s = tau_s
        self._hardware_error = 0
        self._clock = clock
        self._lock = threading.RLock()
        self._memory = bytearray(_MEMORY_SIZE)
        for name, value in model.factory.items():
            self._store(name, value)
        self._store("Model_Number", model.model_number)
        self._store("ID", motor_id)
        self._store("Baud_Rate", model.baudrates[baudrate])
        self._shaft = float(model.resolution // 2 if shaft is None else shaft)
        self._target = self._shaft
        self._velocity = 0.0
        self._spin = 0.0  # ticks per second, in velocity mode
        self._last_update = clock()
        self._refresh_present()

    # What the bus server asks

    @property
    def id(self) -> int:
        return self._load("ID")

    @property
    def baudrate(self) -> int | None:
        return self.model.baudrate_of_code(self._load("Baud_Rate"))

    @property
    def hardware_error(self) -> int:
        """Error bits this motor reports in every status packet (0: healthy)."""
        return self._hardware_error

    @hardware_error.setter
    def hardware_error(self, bits: int) -> None:
        with self._lock:
            self._hardware_error = bits
            if self.model.family is Family.DYNAMIXEL:
                # The status packet only raises an alert; the cause is read from this register.
                self._store("Hardware_Error_Status", bits)

    @property
    def torque_enabled(self) -> bool:
        return bool(self._load("Torque_Enable"))

    def read_bytes(self, address: int, length: int) -> bytes:
        with self._lock:
            self._advance()
            return bytes(self._memory[address : address + length]).ljust(length, b"\x00")

    def write_bytes(self, address: int, data: bytes) -> None:
        """Store `data` as the host wrote it, then apply what the written registers mean."""
        with self._lock:
            self._advance()
            torque_was_on = self.torque_enabled
            self._memory[address : address + len(data)] = data
            if self.torque_enabled and not torque_was_on:
                # Torque on holds the present position: write goal = present so nothing jumps.
                self._store_signed("Goal_Position", self._load_signed("Present_Position"))
            self._retarget()

    def writable(self, address: int, length: int) -> bool:
        """False for read-only registers and, on Dynamixel, EEPROM while torque is on."""
        for register in self.model.registers.values():
            overlaps = address < register.address + register.size and register.address < (
                address + length
            )
            if overlaps and register.read_only:
                return False
        eeprom = address < self.model.eeprom_end
        return not (eeprom and self.model.family is Family.DYNAMIXEL and self.torque_enabled)

    # What a test or a demo does to the physical motor

    @property
    def shaft(self) -> float:
        with self._lock:
            self._advance()
            return self._shaft

    def move_by_hand(self, ticks: float) -> None:
        """Put the shaft at `ticks` (what a person does to a torque-free joint)."""
        with self._lock:
            self._advance()
            self._shaft = float(ticks)
            self._retarget()
            self._refresh_present()

    def register(self, name: str) -> int:
        """A register's value, sign decoded."""
        with self._lock:
            self._advance()
            return self._load_signed(name)

    def set_register(self, name: str, value: int) -> None:
        """Set a register as if the host wrote it (read-only ones included)."""
        register = self.model.registers[name]
        wire = self.model.to_wire(name, value)
        self.write_bytes(register.address, wire.to_bytes(register.size, self.model.byteorder))

    # The shaft

    def _retarget(self) -> None:
        # The SCS series has no operating mode: it always holds a position.
        mode = self._load("Operating_Mode") if "Operating_Mode" in self.model.registers else 0
        self._spin = 0.0
        if self.torque_enabled and mode in _POSITION_MODES[self.model.family]:
            self._target = self._shaft_of_register(self._load_signed("Goal_Position"))
        else:
            self._target = self._shaft
            if self.torque_enabled and mode in _VELOCITY_MODES[self.model.family]:
                self._spin = float(self._load_signed("Goal_Velocity"))

    @property
    def spin(self) -> float:
        """The speed the shaft turns at in velocity mode (ticks per second; 0: still)."""
        with self._lock:
            return self._spin

    def _advance(self) -> None:
        now = self._clock()
        dt, self._last_update = now - self._last_update, now
        if self._spin:
            self._shaft += self._spin * max(dt, 0.0)
            self._target = self._shaft
            self._velocity = self._spin
        elif dt > 0 and self._target != self._shaft:
            before = self._shaft
            self._shaft += (self._target - self._shaft) * (1 - math.exp(-dt / self.tau_s))
            self._velocity = (self._shaft - before) / dt
        else:
            self._velocity = 0.0
        self._refresh_present()

    def _refresh_present(self) -> None:
        self._store_signed("Present_Position", self._register_of_shaft(self._shaft))
        # Velocity units differ by family (0.229 rpm, ~0.732 rpm); ticks/s is close enough here.
        velocity = max(-30_000, min(30_000, int(self._velocity)))
        self._store_signed("Present_Velocity", velocity)
        self._store("Moving", int(abs(self._target - self._shaft) > _MOVING_THRESHOLD_TICKS))

    def _offset(self) -> int:
        if "Homing_Offset" not in self.model.registers:  # the SCS series
            return 0
        return self._load_signed("Homing_Offset")

    def _register_of_shaft(self, shaft: float) -> int:
        ticks = round(shaft)
        if self.model.family is Family.FEETECH:
            return (ticks - self._offset()) % self.model.resolution
        return ticks + self._offset()

    def _shaft_of_register(self, position: int) -> float:
        if self.model.family is Family.FEETECH:
            return float((position + self._offset()) % self.model.resolution)
        return float(position - self._offset())

    # Memory

    def _load(self, name: str) -> int:
        register = self.model.registers[name]
        raw = self._memory[register.address : register.address + register.size]
        return int.from_bytes(raw, self.model.byteorder)

    def _store(self, name: str, value: int) -> None:
        register = self.model.registers[name]
        self._memory[register.address : register.address + register.size] = value.to_bytes(
            register.size, self.model.byteorder
        )

    def _load_signed(self, name: str) -> int:
        return self.model.from_wire(name, self._load(name))

    def _store_signed(self, name: str, value: int) -> None:
        self._store(name, self.model.to_wire(name, value))
