"""Damiao motors each in its own control mode (MIT, position-velocity or force-position), as
LeRobot 0.6.1 drives the Seeed reBot B601 through `motorbridge`: the arm's joints in MIT (or
position-velocity) mode, the gripper in force-position mode with a grip-force cap.

`DamiaoMotorBus` (MIT only) refuses a motor in another mode; this bus instead sets each motor's
mode when it is configured (the `CTRL_MODE` parameter, written then read back, as motorbridge's
`ensure_mode` does), and sends each `Goal_Position` in its motor's mode:

- MIT: the configured kp/kd (registers `Kp`, `Kd`), zero velocity and torque;
- position-velocity: the goal and the motor's velocity limit (degrees per second);
- force-position: the goal, the velocity limit and the torque ratio (0..1 of the maximum).

Every command is answered with a feedback frame, so a motor that stops answering fails the write
with the motor and its CAN ids named, as on the MIT bus.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import structlog

from rlctl.adapters.motors import damiao_protocol as dm
from rlctl.adapters.motors.can_bus import MotorValue, finite, within
from rlctl.adapters.motors.damiao import DamiaoMotorBus
from rlctl.domain.calibration import Calibration
from rlctl.domain.errors import HardwareError, InvalidInput
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

MODES = {"mit": dm.MIT_MODE, "pos_vel": dm.POS_VEL_MODE, "force_pos": dm.FORCE_POS_MODE}


@attrs.frozen
class MotorMode:
    """How one motor is driven: `mode` (mit, pos_vel or force_pos), its velocity limit in
    degrees per second (pos_vel, force_pos) and its torque ratio (force_pos)."""

    mode: str = "mit"
    velocity_dps: float = 0.0
    torque_ratio: float = 1.0

    @property
    def code(self) -> int:
        return MODES[self.mode]


class DamiaoModeBus(DamiaoMotorBus):
    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        *,
        modes: Mapping[str, MotorMode],
        serial_baudrate: int = 921600,
        **kwargs: Any,
    ) -> None:
        """`modes`: each motor's mode (a motor not named is driven in MIT mode);
        `interface="damiao_serial"` opens Damiao's USB-CAN bridge at `port` (a serial device,
        at `serial_baudrate`); the other arguments are `DamiaoMotorBus`'s."""
        super().__init__(port, motors, calibration, **kwargs)
        self._serial_baudrate = serial_baudrate
        unknown = sorted(set(modes) - set(self._motors))
        if unknown:
            raise InvalidInput(
                f"modes names motors the bus does not have: {', '.join(unknown)}", where=self.where
            )
        for name, mode in modes.items():
            if mode.mode not in MODES:
                raise InvalidInput(
                    f"motor {name!r} has the control mode {mode.mode!r}",
                    where=self.where,
                    hint=f"modes: {', '.join(MODES)}",
                )
        self._modes = {name: modes.get(name, MotorMode()) for name in self._motors}

    def _open_can(self, kwargs: dict[str, Any]) -> Any:
        if kwargs["interface"] != "damiao_serial":
            return super()._open_can(kwargs)
        try:
            import serial  # noqa: F401
        except ImportError as error:
            raise HardwareError(
                "Damiao's USB-CAN bridge is a serial device, and pyserial is not installed",
                where=self.where,
                hint="`pip install pyserial` (rlctl's `feetech` extra has it), or reach the bus "
                "through socketcan (`can_adapter=socketcan`)",
            ) from error
        from rlctl.adapters.motors.damiao_serial import DamiaoSerialBus

        try:
            return DamiaoSerialBus(kwargs["channel"], baudrate=self._serial_baudrate)
        except (OSError, ValueError) as error:  # pyserial's SerialException is an OSError
            raise HardwareError(
                f"cannot open Damiao's USB-CAN bridge: {error}",
                where=self.where,
                hint="check the bridge's device path (`rlctl find-port`), that it is plugged in, "
                "and that you may use it (on Linux: be in the dialout group); a SocketCAN "
                "adapter is `--robot.can_adapter=socketcan --robot.port=can0`",
            ) from error

    def mode(self, motor: str) -> MotorMode:
        return self._modes[self._name(motor)]

    # The handshake checks scales only: the modes are set when the motors are configured.

    def _check_params(self, name: str) -> None:
        motor = self._motors[name]
        for param, expected in zip(
            ("PMAX", "VMAX", "TMAX"), dm.MODEL_LIMITS[motor.model], strict=True
        ):
            value = self._read_param(name, param, required=False)
            if value is None:
                log.warning("motor answers no parameter reads; scales unchecked", motor=name)
                return
            if abs(float(value) - expected) > 1e-3 * max(1.0, expected):
                raise HardwareError(
                    f"motor {name!r} ({self._ids(name)}) has {param} {value:g}, a "
                    f"{motor.model} has {expected:g}",
                    where=self.where,
                    hint="give the motor its true model in the robot's motor table, or reset "
                    "its limits with Damiao's debugging tool",
                )

    def ensure_modes(self) -> None:
        """Put every motor in its mode: read `CTRL_MODE`, write it when it differs, read it
        back; a motor that does not take it is refused (it would misread every goal)."""
        self._require_connected()
        for name, mode in self._modes.items():
            current = self._read_param(name, "CTRL_MODE", required=True)
            if int(current) == mode.code:
                continue
            motor_id = self._motors[name].id
            rid = dm.PARAMS["CTRL_MODE"]
            for _ in range(self._retries + 1):
                self._drain()
                self._send(dm.PARAM_ID, dm.param_write(motor_id, rid, mode.code), name, "mode")
                current = self._read_param(name, "CTRL_MODE", required=True)
                if int(current) == mode.code:
                    break
            else:
                raise HardwareError(
                    f"motor {name!r} ({self._ids(name)}) stays in "
                    f"{dm.CONTROL_MODES.get(int(current), f'mode {current}')} mode; it was set "
                    f"to {dm.CONTROL_MODES[mode.code]}",
                    where=self.where,
                    hint="disable the motor and set its control mode with Damiao's debugging "
                    "tool (older firmware takes no mode writes over CAN)",
                )
            log.info("motor control mode set", motor=name, mode=mode.mode)

    def configure_motors(self) -> None:
        self.ensure_modes()
        self.enable_torque()

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        if register != "Goal_Position":
            super().sync_write(register, values, normalize=normalize)
            return
        names = self._names(list(values))
        self._require_connected()
        frames: dict[str, tuple[int, bytes]] = {}
        for name in names:
            goal = finite(values[name], f"the goal of {name!r}")
            motor, mode = self._motors[name], self._modes[name]
            if mode.code == dm.MIT_MODE:
                within(goal, dm.max_position_deg(motor.model), f"the goal of {name!r}")
                gains = self._gains[name]
                data = dm.encode_mit(motor.model, gains["Kp"], gains["Kd"], goal, 0.0, 0.0)
            elif mode.code == dm.POS_VEL_MODE:
                data = dm.encode_pos_vel(goal, mode.velocity_dps)
            else:
                data = dm.encode_force_pos(goal, mode.velocity_dps, mode.torque_ratio)
            frames[name] = (motor.id + dm.MODE_OFFSETS.get(mode.code, 0), data)
        self._exchange(frames, action="a position command")
