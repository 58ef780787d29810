"""Robstride motors on a CAN bus through python-can: the `MotorBus` port, as LeRobot 0.6.1's
`RobstrideMotorsBus` drives them (MIT mode, positions in degrees, per-motor kp/kd gains; a motor
switched to velocity mode takes `Goal_Velocity` in degrees per second).

The frames are LeRobot's byte for byte (`robstride_protocol`). Unlike LeRobot's bus, a motor that
does not answer is never papered over with its last known state: each exchange is retried
(`retries`), then fails with a `HardwareError` naming the motor, its CAN id and the bus. A frame
that is short counts as no answer; a motor answering with a fault frame fails at once with its
fault bits. The handshake is LeRobot's state query (a fault clear, which moves nothing).

Robstride motors keep no calibration besides their zero (`set_zero_position`): positions are
degrees from it whatever `normalize` says, and a calibration written here is only kept in
memory, as in LeRobot. Ids are set with Robstride's MotorStudio, so discovery is not offered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import structlog

from rlctl.adapters.motors import robstride_protocol as rs
from rlctl.adapters.motors.can_bus import DEFAULT_GAINS as DEFAULT_GAINS
from rlctl.adapters.motors.can_bus import GAIN_REGISTERS as GAIN_REGISTERS
from rlctl.adapters.motors.can_bus import CanMotorBus, finite, within
from rlctl.adapters.motors.can_bus import MotorValue as MotorValue
from rlctl.domain.calibration import Calibration
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

STATE_REGISTERS = {
    "Present_Position": "position",
    "Present_Velocity": "velocity",
    "Present_Torque": "torque",
    "Temperature_MOS": "temp_mos",
}


class RobstrideMotorBus(CanMotorBus[rs.MotorState]):
    brand = "Robstride"
    _log = log
    malformed_hint = "check the CAN wiring and termination, and that no two motors share an id"
    silent_hint = (
        "check that the motor is powered and cabled, that it is in MIT mode and that its id is "
        "the robot's (Robstride's MotorStudio shows and sets it)"
    )

    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        *,
        interface: str = "auto",
        bitrate: int = 1_000_000,
        recv_ids: Mapping[str, int] | None = None,
        timeout_s: float = 0.01,
        retries: int = 2,
    ) -> None:
        """`port`: the CAN channel (`can0`; a serial device with `slcan`); `interface`:
        python-can's interface (`socketcan`, `slcan`, `virtual`, or `auto`: slcan for a /dev
        path, socketcan otherwise); `recv_ids`: the id each motor puts first in its answers
        (default: its id); `timeout_s`: how long the answers to one exchange may take."""
        super().__init__(
            port, motors, calibration, recv_ids, timeout_s, retries, interface, bitrate
        )
        self._modes = dict.fromkeys(self._motors, rs.MODE_MIT)

    def _check_models(self) -> None:
        unknown = sorted(
            {m.model for m in self._motors.values() if m.model.lower() not in rs.MODEL_LIMITS}
        )
        if unknown:
            raise InvalidInput(
                f"unknown Robstride motor model(s) {', '.join(unknown)}",
                where=self.where,
                hint=f"known models: {', '.join(m.upper() for m in rs.MODEL_LIMITS)}",
            )

    def _default_recv_id(self, motor: Motor) -> int:
        return motor.id

    def _setup_command(self) -> str:
        return f"rlctl setup-can --mode=setup --use_fd=false --interfaces={self._port}"

    def mode(self, motor: str) -> int:
        return self._modes[self._name(motor)]

    # Life cycle

    def _handshake_hint(self, error: HardwareError) -> str:
        return (
            error.hint
            or "check the supply, the CAN wiring (CANH, CANL, GND, 120 Ω at both ends) "
            "and the motors' ids (Robstride's MotorStudio shows and sets them)"
        )

    # Registers

    def sync_read(
        self, register: str, motors: Sequence[str] | None = None, *, normalize: bool = True
    ) -> dict[str, MotorValue]:
        names = self._names(motors)
        if register in STATE_REGISTERS:
            self._require_connected()
            states = self._query(names, action=f"read {register}")
            field = STATE_REGISTERS[register]
            return {name: float(getattr(states[name], field)) for name in names}
        if register in GAIN_REGISTERS:
            return {name: self._gains[name][register] for name in names}
        raise self._unknown_register(register, readable=True)

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        names = self._names(list(values))
        if register in GAIN_REGISTERS:
            low, high = rs.KP_RANGE if register == "Kp" else rs.KD_RANGE
            for name in names:
                gain = finite(values[name], f"{register} of {name!r}")
                if not low <= gain <= high:
                    raise InvalidInput(
                        f"{register} of {name!r} is {gain:g}, outside [{low:g}, {high:g}]",
                        where=self.where,
                    )
                self._gains[name][register] = gain
            return
        if register not in ("Goal_Position", "Goal_Velocity"):
            raise self._unknown_register(register, readable=False)
        self._require_connected()
        wanted = rs.MODE_MIT if register == "Goal_Position" else rs.MODE_VELOCITY
        frames = {}
        for name in names:
            if self._modes[name] != wanted:
                raise InvalidInput(
                    f"motor {name!r} is in {rs.MODE_NAMES[self._modes[name]]} mode: "
                    f"{register} needs {rs.MODE_NAMES[wanted]} mode",
                    where=self.where,
                    hint=f"switch it first (bus.switch_mode({wanted}, [{name!r}]))",
                )
            goal = finite(values[name], f"the {register} of {name!r}")
            pmax, vmax, _ = rs.limits(self._motors[name].model)
            if register == "Goal_Position":
                within(goal, math.degrees(pmax), f"the {register} of {name!r}")
                gains = self._gains[name]
                data = rs.encode_mit(self._motors[name].model, gains["Kp"], gains["Kd"], goal, 0, 0)
            else:
                within(goal, math.degrees(vmax), f"the {register} of {name!r}")
                data = rs.encode_velocity(goal)
            frames[name] = data
        what = "an MIT position command" if wanted == rs.MODE_MIT else "a velocity command"
        self._exchange(self._to_motors(frames), action=what)

    def switch_mode(self, mode: int, motors: Iterable[str] | None = None) -> None:
        """Switch motors to MIT (0), position-velocity (1) or velocity (2) control."""
        if mode not in rs.MODE_NAMES:
            raise InvalidInput(
                f"unknown Robstride control mode {mode}",
                where=self.where,
                hint="0: MIT, 1: position-velocity, 2: velocity",
            )
        self._require_connected()
        names = self._names(None if motors is None else list(motors))
        self._exchange(
            self._to_motors(dict.fromkeys(names, rs.mode_command(mode))),
            action=f"a switch to {rs.MODE_NAMES[mode]} mode",
        )
        for name in names:
            self._modes[name] = mode

    def configure_motors(self) -> None:
        """LeRobot's configuration: every motor enabled, in MIT mode."""
        self.enable_torque()
        self.switch_mode(rs.MODE_MIT)

    def _simple(self, motors: Iterable[str] | None, command: int, action: str) -> None:
        self._require_connected()
        names = self._names(None if motors is None else list(motors))
        self._exchange(
            self._to_motors(dict.fromkeys(names, rs.simple_command(command))), action=action
        )

    # Discovery: Robstride ids are set with Robstride's tools

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        raise NotSupported(
            "Robstride motors get their CAN ids from Robstride's MotorStudio, not from rlctl",
            where=self.where,
        )

    def _discovery_hint(self) -> str:
        return "name each motor's id and model in the robot's motor table"

    # Exchanges

    def _query(self, names: list[str], *, action: str) -> dict[str, rs.MotorState]:
        return self._exchange(
            self._to_motors(dict.fromkeys(names, rs.simple_command(rs.CMD_CLEAR_FAULT))),
            action=action,
        )

    def _answer_id(self, arbitration_id: int, data: bytes) -> int | None:
        # As LeRobot's: a frame is told apart by its first byte, whatever its arbitration id.
        return data[0] if data else None

    def _decode(self, name: str, data: bytes, action: str) -> rs.MotorState:
        bits = rs.fault_bits(data)
        if bits is not None:
            raise HardwareError(
                f"motor {name!r} ({self._ids(name)}) reports a fault (fault bits "
                f"0x{bits:08X}) answering {action}",
                where=self.where,
                hint="disable the motor, remove the cause (load, supply, heat) and "
                "power-cycle it; Robstride's manual and MotorStudio decode the bits",
            )
        return rs.decode_feedback(self._motors[name].model, data[0], data)

    # Names

    def _ids(self, name: str) -> str:
        motor_id, recv = self._motors[name].id, self._recv[name]
        return f"CAN id 0x{motor_id:02X}" + (
            f", answers as 0x{recv:02X}" if recv != motor_id else ""
        )

    def _unknown_register(self, register: str, *, readable: bool) -> InvalidInput:
        known = (
            [*STATE_REGISTERS, *GAIN_REGISTERS]
            if readable
            else ["Goal_Position", "Goal_Velocity", *GAIN_REGISTERS]
        )
        return InvalidInput(
            f"Robstride motors have no {'readable' if readable else 'writable'} register "
            f"{register!r} here",
            where=self.where,
            hint=f"{'readable' if readable else 'writable'}: {', '.join(known)}",
        )

    def _check_ids(self) -> None:
        for name, recv in self._recv.items():
            if not 0 <= recv <= 0xFF:
                raise InvalidInput(
                    f"the receive id of {name!r} is {recv}: it is one byte (0..255)",
                    where=self.where,
                )
        for what, ids in (
            ("CAN id", {n: m.id for n, m in self._motors.items()}),
            ("receive id", self._recv),
        ):
            seen: dict[int, str] = {}
            for name, can_id in ids.items():
                if can_id in seen:
                    raise InvalidInput(
                        f"motors {seen[can_id]!r} and {name!r} share the {what} 0x{can_id:02X}",
                        where=self.where,
                        hint="every motor needs its own id",
                    )
                seen[can_id] = name
