"""Damiao motors on a CAN bus through python-can: the `MotorBus` port, as LeRobot 0.6.1's
`DamiaoMotorsBus` drives them (MIT mode, positions in degrees, per-motor kp/kd gains).

Unlike LeRobot's, a motor that does not answer is never papered over with its last known state:
each exchange is retried (`retries`), then fails with a `HardwareError` naming the motor, its CAN
ids and the bus. A frame that is short or names another motor counts as no answer; a motor whose
status reports a fault (over-current, overload, …) fails at once with the fault named. The
handshake only queries (a refresh moves nothing and enables no torque) and checks each motor's
control mode and frame scales against its model, so a motor in another mode or configured for
another model is refused before it is sent a goal it would misread.

Damiao motors keep no calibration besides their zero (`set_zero_position`): positions are degrees
from it whatever `normalize` says, and a calibration written here is only kept in memory, as in
LeRobot. Ids are set with Damiao's own tools, so discovery and id setup are not offered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog

from rlctl.adapters.motors import damiao_protocol as dm
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
    "Temperature_Rotor": "temp_rotor",
}
RECV_OFFSET = 0x10  # the OpenArm's convention: a motor answers on its send id + 0x10
SCALE_PARAMS = ("PMAX", "VMAX", "TMAX")


class DamiaoMotorBus(CanMotorBus[dm.MotorState]):
    brand = "Damiao"
    _log = log
    malformed_hint = (
        "check the CAN wiring and termination, and that no two motors share a receive id"
    )
    silent_hint = (
        "check that the motor is powered (24 V) and cabled, and that its ids are the robot's "
        "(Damiao's debugging tool sets them)"
    )

    def __init__(
        self,
        port: str,
        motors: Mapping[str, Motor],
        calibration: Calibration | None = None,
        *,
        interface: str = "socketcan",
        use_can_fd: bool = True,
        bitrate: int = 1_000_000,
        data_bitrate: int | None = 5_000_000,
        recv_ids: Mapping[str, int] | None = None,
        timeout_s: float = 0.01,
        retries: int = 2,
    ) -> None:
        """`port`: the CAN channel (`can0`; a serial device with `slcan`); `interface`:
        python-can's interface (`socketcan`, `slcan`, `virtual`, or `auto`: slcan for a /dev
        path, socketcan otherwise); `recv_ids`: each motor's answer id (default: its id +
        0x10); `timeout_s`: how long the answers to one exchange may take."""
        super().__init__(
            port,
            motors,
            calibration,
            recv_ids,
            timeout_s,
            retries,
            interface,
            bitrate,
            use_can_fd,
            data_bitrate,
        )

    def _check_models(self) -> None:
        unknown = sorted({m.model for m in self._motors.values()} - set(dm.MODEL_LIMITS))
        if unknown:
            raise InvalidInput(
                f"unknown Damiao motor model(s) {', '.join(unknown)}",
                where=self.where,
                hint=f"known models: {', '.join(dm.MODEL_LIMITS)}",
            )

    def _default_recv_id(self, motor: Motor) -> int:
        return motor.id + RECV_OFFSET

    def _setup_command(self) -> str:
        return f"rlctl setup-can --interfaces={self._port}"

    # Life cycle

    def _handshake(self) -> None:
        super()._handshake()
        for name in self._motors:
            self._check_params(name)

    def _handshake_hint(self, error: HardwareError) -> str:
        return (
            "check the 24 V supply, the CAN wiring (CANH, CANL, GND, 120 Ω at both "
            "ends) and the motors' ids (`rlctl setup-can --mode=test` lists who "
            "answers)"
        )

    def _check_params(self, name: str) -> None:
        """Refuse a motor not in MIT mode, or whose frame scales are not its model's (it would
        read every goal at another scale). A motor that does not answer parameter reads (older
        firmware) is let through, with a warning."""
        motor = self._motors[name]
        mode = self._read_param(name, "CTRL_MODE", required=False)
        if mode is None:
            log.warning("motor answers no parameter reads; mode and scales unchecked", motor=name)
            return
        if int(mode) != dm.MIT_MODE:
            raise HardwareError(
                f"motor {name!r} ({self._ids(name)}) is in "
                f"{dm.CONTROL_MODES.get(int(mode), f'mode {mode}')} mode, not MIT",
                where=self.where,
                hint="set its control mode to MIT with Damiao's debugging tool",
            )
        for param, expected in zip(SCALE_PARAMS, dm.MODEL_LIMITS[motor.model], strict=True):
            value = self._read_param(name, param, required=False)
            if value is not None and abs(float(value) - expected) > 1e-3 * max(1.0, expected):
                raise HardwareError(
                    f"motor {name!r} ({self._ids(name)}) has {param} {value:g}, a "
                    f"{motor.model} has {expected:g}",
                    where=self.where,
                    hint="give the motor its true model in the robot's motor table, or reset "
                    "its limits with Damiao's debugging tool",
                )

    # Registers

    def sync_read(
        self, register: str, motors: Sequence[str] | None = None, *, normalize: bool = True
    ) -> dict[str, MotorValue]:
        names = self._names(motors)
        self._require_connected()
        if register in STATE_REGISTERS:
            states = self._exchange_refresh(names, action=f"read {register}")
            field = STATE_REGISTERS[register]
            return {name: float(getattr(states[name], field)) for name in names}
        if register in GAIN_REGISTERS:
            return {name: self._gains[name][register] for name in names}
        if register in dm.PARAMS:
            return {name: self._read_param(name, register, required=True) for name in names}
        raise self._unknown_register(register, readable=True)

    def sync_write(
        self, register: str, values: Mapping[str, MotorValue], *, normalize: bool = True
    ) -> None:
        names = self._names(list(values))
        if register in GAIN_REGISTERS:
            for name in names:
                self._gains[name][register] = finite(values[name], f"{register} of {name!r}")
            return
        if register != "Goal_Position":
            raise self._unknown_register(register, readable=False)
        self._require_connected()
        frames = {}
        for name in names:
            goal = finite(values[name], f"the goal of {name!r}")
            model = self._motors[name].model
            within(goal, dm.max_position_deg(model), f"the goal of {name!r}")
            gains = self._gains[name]
            frames[name] = (
                self._motors[name].id,
                dm.encode_mit(model, gains["Kp"], gains["Kd"], goal, 0.0, 0.0),
            )
        self._exchange(frames, action="an MIT position command")

    def configure_motors(self) -> None:
        """LeRobot's configuration in MIT mode: every motor enabled."""
        self.enable_torque()

    def _simple(self, motors: Iterable[str] | None, command: int, action: str) -> None:
        self._require_connected()
        names = self._names(None if motors is None else list(motors))
        frame = dm.simple_command(command)
        # Enabling is how a motor whose CAN timeout ran out is armed again.
        rearmable = command == dm.CMD_ENABLE
        self._exchange(
            self._to_motors(dict.fromkeys(names, frame)), action=action, rearmable=rearmable
        )

    # Discovery: Damiao ids and bitrates are set with Damiao's tools

    def setup_motor(self, motor: str, *, baudrates: Iterable[int] | None = None) -> None:
        raise NotSupported(
            "Damiao motors get their CAN ids from Damiao's debugging tool, not from rlctl",
            where=self.where,
            hint=self._discovery_hint(),
        )

    def _discovery_hint(self) -> str:
        return f"`rlctl setup-can --mode=test --interfaces={self._port}` lists the ids that answer"

    # Exchanges

    def _query(self, names: list[str], *, action: str) -> dict[str, dm.MotorState]:
        return self._exchange_refresh(names, action=action, rearmable=True)

    def _exchange_refresh(
        self, names: list[str], *, action: str, rearmable: bool = False
    ) -> dict[str, dm.MotorState]:
        frames = {
            n: (dm.PARAM_ID, dm.param_request(self._motors[n].id, dm.CMD_REFRESH)) for n in names
        }
        return self._exchange(frames, action=action, rearmable=rearmable)

    def _check_state(
        self, name: str, state: dm.MotorState, action: str, *, rearmable: bool
    ) -> None:
        """`rearmable`: a motor reporting that its CAN timeout ran out (it disabled itself while
        no host spoke to it, as between two runs) is not a fault here (handshake, enable)."""
        if rearmable and state.status == dm.STATE_TIMED_OUT:
            log.warning("motor had disabled itself: its CAN timeout ran out", motor=name)
        elif state.fault is not None:
            raise HardwareError(
                f"motor {name!r} ({self._ids(name)}) reports {state.fault} (answering {action})",
                where=self.where,
                hint="disable the motor, remove the cause (load, supply, heat) and "
                "power-cycle it; its fault stays latched until then",
            )

    def _answer_id(self, arbitration_id: int, data: bytes) -> int | None:
        return arbitration_id

    def _decode(self, name: str, data: bytes, action: str) -> dm.MotorState:
        motor = self._motors[name]
        return dm.decode_feedback(motor.model, motor.id, data)

    def _read_param(self, name: str, param: str, *, required: bool) -> Any:
        self._require_connected()
        rid = dm.PARAMS[param]
        motor_id = self._motors[name].id
        for _ in range(self._retries + 1):
            self._drain()
            self._send(dm.PARAM_ID, dm.param_request(motor_id, dm.CMD_READ_PARAM, rid), name, param)
            for msg in self._answers():
                data = bytes(msg.data)
                if msg.arbitration_id == self._recv[name] and dm.is_param_reply(
                    data, motor_id, rid
                ):
                    return dm.decode_param(rid, data[4:8])
        if not required:
            return None
        raise HardwareError(
            f"motor {name!r} ({self._ids(name)}) did not answer the read of {param} after "
            f"{self._retries + 1} tries",
            where=self.where,
            hint="check that the motor is powered and cabled; older firmware answers no "
            "parameter reads",
        )

    # Names

    def _ids(self, name: str) -> str:
        return f"CAN id 0x{self._motors[name].id:02X}, answers on 0x{self._recv[name]:02X}"

    def _unknown_register(self, register: str, *, readable: bool) -> InvalidInput:
        known = (
            [*STATE_REGISTERS, *GAIN_REGISTERS, *dm.PARAMS]
            if readable
            else ["Goal_Position", *GAIN_REGISTERS]
        )
        return InvalidInput(
            f"Damiao motors in MIT mode have no {'readable' if readable else 'writable'} "
            f"register {register!r}",
            where=self.where,
            hint=f"{'readable' if readable else 'writable'}: {', '.join(known)}",
        )

    def _check_ids(self) -> None:
        seen: dict[int, str] = {}
        for name, motor in self._motors.items():
            for can_id in (motor.id, self._recv[name]):
                if can_id in seen and seen[can_id] != name:
                    raise InvalidInput(
                        f"motors {seen[can_id]!r} and {name!r} share the CAN id 0x{can_id:02X}",
                        where=self.where,
                        hint="every motor needs its own send and receive ids",
                    )
                seen[can_id] = name
