"""One arm on one motor bus: its calibration file, its motors' EEPROM, its joints as a vector.

Followers and leaders share this. On `connect` the saved calibration is loaded and, when the
motors hold another one (a motor was swapped, or LeRobot calibrated it differently), written to
them — what pressing Enter at LeRobot's "use the calibration file?" prompt does. An arm without
a saved calibration connects uncalibrated; `CalibrateRobot` then drives `prepare_calibration` and
`apply_calibration` — unless it was calibrated at the factory (`factory_calibration` in its plan,
ROBOTIS's OMX): then that calibration is written to the motors and saved on connect, as
LeRobot's `connect` does. The device-specific settings (operating modes, gains, current limits) come
in as two callables, so an arm type is a motor table and two short functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import structlog

from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationKey, CalibrationPlan, CalibrationStore
from rlctl.domain.action_guard import ActionLimits
from rlctl.domain.calibration import Calibration, user_range
from rlctl.domain.errors import CalibrationError

log = structlog.get_logger(__name__)

POSITION = "Present_Position"
GOAL = "Goal_Position"


class ServoArm:
    def __init__(
        self,
        bus: MotorBus,
        key: CalibrationKey,
        store: CalibrationStore,
        plan: CalibrationPlan,
        *,
        configure: Callable[[ServoArm], None],
        prepare: Callable[[ServoArm], None],
        writes_drive_modes: bool = False,
        handshake: bool = True,
    ) -> None:
        """`configure(arm)` sets the motors up for use (after connecting and after each
        calibration); `prepare(arm)` readies them to be moved by hand for calibration.
        `writes_drive_modes`: the motors have a Drive_Mode register the calibration sets
        (Dynamixel); Feetech keeps direction in software. `handshake`: ping every motor on
        connect (LeRobot's Hope JR arm connects without)."""
        self._bus = bus
        self._key = key
        self._store = store
        self._plan = plan
        self._configure = configure
        self._prepare = prepare
        self._writes_drive_modes = writes_drive_modes
        self._handshake = handshake
        self._calibrated = False
        self.motor_names: list[str] = list(bus.motors)

    # CalibrationTarget

    @property
    def calibration_key(self) -> CalibrationKey:
        return self._key

    @property
    def bus(self) -> MotorBus:
        return self._bus

    @property
    def calibration_plan(self) -> CalibrationPlan:
        return self._plan

    @property
    def is_calibrated(self) -> bool:
        return self._calibrated

    def prepare_calibration(self) -> None:
        self._bus.disable_torque()
        self._prepare(self)

    def apply_calibration(self, calibration: Calibration) -> None:
        self._write(calibration)
        self._configure(self)

    # Life cycle

    @property
    def is_connected(self) -> bool:
        return self._bus.is_connected

    def connect(self) -> None:
        self._bus.connect(handshake=self._handshake)
        try:
            saved = self._store.load(self._key)
            factory = self._plan.factory_calibration
            if saved is not None:
                self._adopt(saved)
            elif factory is not None:
                self._bus.disable_torque()
                self._prepare(self)
                self._write(factory)
                location = self._store.save(self._key, factory)
                log.info("factory calibration written", device=self._key.label, file=location)
            else:
                log.warning("no calibration saved", device=self._key.label)
            self._configure(self)
        except BaseException:
            self._bus.disconnect(disable_torque=False)
            raise

    def disconnect(self, *, disable_torque: bool = True) -> None:
        self._bus.disconnect(disable_torque=disable_torque)

    # Joints as vectors, in the motor table's order

    def positions(self, motors: Sequence[str] | None = None) -> np.ndarray:
        names = self.motor_names if motors is None else list(motors)
        values = self._bus.sync_read(POSITION, names)
        return np.asarray([values[name] for name in names], dtype=np.float32)

    def goal_limits(self, names: Sequence[str] | None = None) -> ActionLimits:
        """Each joint's calibrated range in the units its goals are given in; `names` label the
        dimensions (the action's names), the motor names by default."""
        calibration = self._bus.calibration
        if calibration is None or not self._calibrated:
            raise CalibrationError(
                "the arm has no calibration, so it cannot be sent goals",
                where=self._key.label,
                hint=f"run `rlctl calibrate` for {self._key.label}",
            )
        lows, highs = [], []
        for motor in self.motor_names:
            low, high = user_range(
                calibration[motor], self._bus.motors[motor].norm_mode, self._plan.resolution
            )
            lows.append(low)
            highs.append(high)
        return ActionLimits(tuple(names or self.motor_names), lows, highs)

    def write_goals(self, goals: np.ndarray) -> None:
        self._bus.sync_write(GOAL, dict(zip(self.motor_names, (float(v) for v in goals))))

    # Calibration in the motors

    def _adopt(self, saved: Calibration) -> None:
        held = self._bus.read_calibration()
        if _same(held, saved, drive_modes=self._writes_drive_modes):
            self._bus.calibration = saved
        else:
            log.info("writing the saved calibration to the motors", device=self._key.label)
            self._write(saved)
        self._calibrated = True

    def _write(self, calibration: Calibration) -> None:
        self._bus.write_calibration(calibration)
        if self._writes_drive_modes:
            for motor in calibration:
                self._bus.write("Drive_Mode", motor, calibration[motor].drive_mode)
        self._calibrated = True


def _same(held: Calibration, saved: Calibration, *, drive_modes: bool) -> bool:
    """LeRobot's `is_calibrated`: the same motors with the same offsets and ranges (and, where
    the motors keep one, the same drive mode)."""
    if set(held) != set(saved):
        return False
    for motor in saved:
        a, b = held[motor], saved[motor]
        if (a.homing_offset, a.range_min, a.range_max) != (
            b.homing_offset,
            b.range_min,
            b.range_max,
        ):
            return False
        if drive_modes and a.drive_mode != b.drive_mode:
            return False
    return True
