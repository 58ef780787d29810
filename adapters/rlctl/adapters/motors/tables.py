"""Control tables of the servos we drive, shared by the adapters and the virtual bus.

Addresses, sizes, baud-rate codes, model numbers and signed registers are those of LeRobot 0.6.1's
`motors/feetech/tables.py` and `motors/dynamixel/tables.py` (Feetech STS/SMS manual, ROBOTIS
e-Manual for the X series). Factory values are what a new motor holds, so a virtual motor starts
where a real one does.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

import attrs

from rlctl.domain.calibration import (
    decode_sign_magnitude,
    decode_twos_complement,
    encode_sign_magnitude,
    encode_twos_complement,
)
from rlctl.domain.errors import InvalidInput


class Family(enum.StrEnum):
    FEETECH = "feetech"
    DYNAMIXEL = "dynamixel"


@attrs.frozen
class Register:
    address: int
    size: int
    read_only: bool = False

    def __attrs_post_init__(self) -> None:
        if self.size not in (1, 2, 4):
            raise ValueError(f"registers are 1, 2 or 4 bytes, not {self.size}")


def _table(
    entries: Mapping[str, tuple[int, int] | tuple[int, int, bool]],
) -> Mapping[str, Register]:
    return MappingProxyType({name: Register(*entry) for name, entry in entries.items()})


RO = True  # marks read-only registers below

# The EEPROM registers both Feetech series (STS/SMS and SCS) place alike.
_FEETECH_EEPROM: dict[str, tuple[int, int] | tuple[int, int, bool]] = {
    "Firmware_Major_Version": (0, 1, RO),
    "Firmware_Minor_Version": (1, 1, RO),
    "Model_Number": (3, 2, RO),
    "ID": (5, 1),
    "Baud_Rate": (6, 1),
    "Return_Delay_Time": (7, 1),
    "Response_Status_Level": (8, 1),
    "Min_Position_Limit": (9, 2),
    "Max_Position_Limit": (11, 2),
    "Max_Temperature_Limit": (13, 1),
    "Max_Voltage_Limit": (14, 1),
    "Min_Voltage_Limit": (15, 1),
    "Max_Torque_Limit": (16, 2),
    "Phase": (18, 1),
    "Unloading_Condition": (19, 1),
    "LED_Alarm_Condition": (20, 1),
    "P_Coefficient": (21, 1),
    "D_Coefficient": (22, 1),
    "I_Coefficient": (23, 1),
    "Minimum_Startup_Force": (24, 2),
    "CW_Dead_Zone": (26, 1),
    "CCW_Dead_Zone": (27, 1),
}

STS_CONTROL_TABLE = _table(
    {
        # EEPROM (written only with torque off and Lock = 0)
        **_FEETECH_EEPROM,
        "Protection_Current": (28, 2),
        "Angular_Resolution": (30, 1),
        "Homing_Offset": (31, 2),
        "Operating_Mode": (33, 1),
        "Protective_Torque": (34, 1),
        "Protection_Time": (35, 1),
        "Overload_Torque": (36, 1),
        "Velocity_closed_loop_P_proportional_coefficient": (37, 1),
        "Over_Current_Protection_Time": (38, 1),
        "Velocity_closed_loop_I_integral_coefficient": (39, 1),
        # SRAM
        "Torque_Enable": (40, 1),
        "Acceleration": (41, 1),
        "Goal_Position": (42, 2),
        "Goal_Time": (44, 2),
        "Goal_Velocity": (46, 2),
        "Torque_Limit": (48, 2),
        "Lock": (55, 1),
        "Present_Position": (56, 2, RO),
        "Present_Velocity": (58, 2, RO),
        "Present_Load": (60, 2, RO),
        "Present_Voltage": (62, 1, RO),
        "Present_Temperature": (63, 1, RO),
        "Status": (65, 1, RO),
        "Moving": (66, 1, RO),
        "Present_Current": (69, 2, RO),
        "Goal_Position_2": (71, 2, RO),
        # Factory
        "Moving_Velocity": (80, 1),
        "Moving_Velocity_Threshold": (80, 1),
        "DTs": (81, 1),
        "Velocity_Unit_factor": (82, 1),
        "Hts": (83, 1),
        "Maximum_Velocity_Limit": (84, 1),
        "Maximum_Acceleration": (85, 1),
    }
)
STS_EEPROM_END = 40  # addresses below are EEPROM

# The SCS series (SCS0009: the Hope JR hand), Feetech's protocol 1: no homing offset, no
# operating mode, and words stored big-endian.
SCS_CONTROL_TABLE = _table(
    {
        # EEPROM
        **_FEETECH_EEPROM,
        "Protective_Torque": (37, 1),
        "Protection_Time": (38, 1),
        # SRAM
        "Torque_Enable": (40, 1),
        "Acceleration": (41, 1),
        "Goal_Position": (42, 2),
        "Running_Time": (44, 2),
        "Goal_Velocity": (46, 2),
        "Lock": (48, 1),
        "Present_Position": (56, 2, RO),
        "Present_Velocity": (58, 2, RO),
        "Present_Load": (60, 2, RO),
        "Present_Voltage": (62, 1, RO),
        "Present_Temperature": (63, 1, RO),
        "Sync_Write_Flag": (64, 1, RO),
        "Status": (65, 1, RO),
        "Moving": (66, 1, RO),
        # Factory
        "PWM_Maximum_Step": (78, 1),
        "Moving_Velocity_Threshold*50": (79, 1),
        "DTs": (80, 1),
        "Minimum_Velocity_Limit*50": (81, 1),
        "Maximum_Velocity_Limit*50": (82, 1),
        "Acceleration_2": (83, 1),
    }
)

X_SERIES_CONTROL_TABLE = _table(
    {
        # EEPROM (written only with torque off)
        "Model_Number": (0, 2, RO),
        "Model_Information": (2, 4, RO),
        "Firmware_Version": (6, 1, RO),
        "ID": (7, 1),
        "Baud_Rate": (8, 1),
        "Return_Delay_Time": (9, 1),
        "Drive_Mode": (10, 1),
        "Operating_Mode": (11, 1),
        "Secondary_ID": (12, 1),
        "Protocol_Type": (13, 1),
        "Homing_Offset": (20, 4),
        "Moving_Threshold": (24, 4),
        "Temperature_Limit": (31, 1),
        "Max_Voltage_Limit": (32, 2),
        "Min_Voltage_Limit": (34, 2),
        "PWM_Limit": (36, 2),
        "Current_Limit": (38, 2),
        "Acceleration_Limit": (40, 4),
        "Velocity_Limit": (44, 4),
        "Max_Position_Limit": (48, 4),
        "Min_Position_Limit": (52, 4),
        "Shutdown": (63, 1),
        # RAM
        "Torque_Enable": (64, 1),
        "LED": (65, 1),
        "Status_Return_Level": (68, 1),
        "Registered_Instruction": (69, 1, RO),
        "Hardware_Error_Status": (70, 1, RO),
        "Velocity_I_Gain": (76, 2),
        "Velocity_P_Gain": (78, 2),
        "Position_D_Gain": (80, 2),
        "Position_I_Gain": (82, 2),
        "Position_P_Gain": (84, 2),
        "Feedforward_2nd_Gain": (88, 2),
        "Feedforward_1st_Gain": (90, 2),
        "Bus_Watchdog": (98, 1),
        "Goal_PWM": (100, 2),
        "Goal_Current": (102, 2),
        "Goal_Velocity": (104, 4),
        "Profile_Acceleration": (108, 4),
        "Profile_Velocity": (112, 4),
        "Goal_Position": (116, 4),
        "Realtime_Tick": (120, 2, RO),
        "Moving": (122, 1, RO),
        "Moving_Status": (123, 1, RO),
        "Present_PWM": (124, 2, RO),
        "Present_Current": (126, 2, RO),
        "Present_Velocity": (128, 4, RO),
        "Present_Position": (132, 4, RO),
        "Velocity_Trajectory": (136, 4, RO),
        "Position_Trajectory": (140, 4, RO),
        "Present_Input_Voltage": (144, 2, RO),
        "Present_Temperature": (146, 1, RO),
    }
)
X_SERIES_EEPROM_END = 64

STS_BAUDRATES = MappingProxyType(
    {
        1_000_000: 0,
        500_000: 1,
        250_000: 2,
        128_000: 3,
        115_200: 4,
        57_600: 5,
        38_400: 6,
        19_200: 7,
    }
)
X_SERIES_BAUDRATES = MappingProxyType(
    {
        9_600: 0,
        57_600: 1,
        115_200: 2,
        1_000_000: 3,
        2_000_000: 4,
        3_000_000: 5,
        4_000_000: 6,
    }
)

# Feetech: the bit holding the sign (sign-magnitude). Dynamixel: two's complement over the size.
STS_SIGN_BITS = MappingProxyType(
    {
        "Present_Load": 10,
        "Homing_Offset": 11,
        "Goal_Position": 15,
        "Goal_Velocity": 15,
        "Present_Position": 15,
        "Present_Velocity": 15,
    }
)
X_SERIES_SIGNED = frozenset(
    {
        "Homing_Offset",
        "Goal_PWM",
        "Goal_Current",
        "Goal_Velocity",
        "Goal_Position",
        "Present_Position",
        "Present_PWM",
        "Present_Current",
        "Present_Velocity",
    }
)

STS_FACTORY = MappingProxyType(
    {
        "Firmware_Major_Version": 3,
        "Firmware_Minor_Version": 10,
        "ID": 1,
        "Baud_Rate": 0,
        "Return_Delay_Time": 250,
        "Response_Status_Level": 1,
        "Min_Position_Limit": 0,
        "Max_Position_Limit": 4095,
        "Max_Temperature_Limit": 70,
        "Max_Voltage_Limit": 140,
        "Min_Voltage_Limit": 40,
        "Max_Torque_Limit": 1000,
        "Phase": 12,
        "Unloading_Condition": 44,
        "LED_Alarm_Condition": 47,
        "P_Coefficient": 32,
        "D_Coefficient": 32,
        "Minimum_Startup_Force": 16,
        "CW_Dead_Zone": 1,
        "CCW_Dead_Zone": 1,
        "Protection_Current": 500,
        "Angular_Resolution": 1,
        "Operating_Mode": 0,
        "Protective_Torque": 20,
        "Protection_Time": 200,
        "Overload_Torque": 80,
        "Torque_Limit": 1000,
        "Lock": 1,
        "Present_Voltage": 120,
        "Present_Temperature": 30,
        "Maximum_Acceleration": 50,
    }
)

SCS_FACTORY = MappingProxyType(
    {
        "Firmware_Major_Version": 3,
        "Firmware_Minor_Version": 6,
        "ID": 1,
        "Baud_Rate": 0,
        "Return_Delay_Time": 250,
        "Response_Status_Level": 1,
        "Min_Position_Limit": 0,
        "Max_Position_Limit": 1023,
        "Max_Temperature_Limit": 70,
        "Max_Voltage_Limit": 90,
        "Min_Voltage_Limit": 40,
        "Max_Torque_Limit": 1000,
        "P_Coefficient": 15,
        "D_Coefficient": 32,
        "Lock": 1,
        "Present_Voltage": 60,
        "Present_Temperature": 30,
    }
)

X_SERIES_FACTORY = MappingProxyType(
    {
        "Firmware_Version": 46,
        "ID": 1,
        "Baud_Rate": 1,
        "Return_Delay_Time": 250,
        "Operating_Mode": 3,
        "Protocol_Type": 2,
        "Secondary_ID": 255,
        "Moving_Threshold": 10,
        "Temperature_Limit": 70,
        "Max_Voltage_Limit": 140,
        "Min_Voltage_Limit": 60,
        "PWM_Limit": 885,
        "Current_Limit": 1193,
        "Acceleration_Limit": 32767,
        "Velocity_Limit": 265,
        "Max_Position_Limit": 4095,
        "Min_Position_Limit": 0,
        "Shutdown": 52,
        "Status_Return_Level": 2,
        "Velocity_I_Gain": 1920,
        "Velocity_P_Gain": 100,
        "Position_P_Gain": 800,
        "Present_Input_Voltage": 120,
        "Present_Temperature": 30,
    }
)


@attrs.frozen
class ServoModel:
    """What the host and a virtual motor need to know about one servo model."""

    name: str
    family: Family
    model_number: int
    resolution: int
    registers: Mapping[str, Register]
    eeprom_end: int
    baudrates: Mapping[int, int]  # baud rate -> Baud_Rate register code
    sign_bits: Mapping[str, int]  # Feetech sign-magnitude registers
    twos_complement: frozenset[str]  # Dynamixel signed registers
    factory: Mapping[str, int]
    # Feetech's protocol 1 (the SCS series): words big-endian, no sync read, no broadcast ping.
    protocol: int = 0

    @property
    def byteorder(self) -> Literal["little", "big"]:
        return "big" if self.protocol == 1 else "little"

    def register(self, name: str) -> Register:
        try:
            return self.registers[name]
        except KeyError:
            raise InvalidInput(
                f"{self.name} has no register {name!r}",
                hint=f"known registers: {', '.join(self.registers)}",
            ) from None

    def to_wire(self, name: str, value: int) -> int:
        """A signed value as the unsigned integer the register holds."""
        if name in self.sign_bits:
            return encode_sign_magnitude(value, self.sign_bits[name])
        if name in self.twos_complement:
            return encode_twos_complement(value, self.register(name).size)
        return value

    def from_wire(self, name: str, raw: int) -> int:
        if name in self.sign_bits:
            return decode_sign_magnitude(raw, self.sign_bits[name])
        if name in self.twos_complement:
            return decode_twos_complement(raw, self.register(name).size)
        return raw

    def baudrate_of_code(self, code: int) -> int | None:
        return next((baud for baud, c in self.baudrates.items() if c == code), None)


def _sts(name: str, model_number: int) -> ServoModel:
    return ServoModel(
        name=name,
        family=Family.FEETECH,
        model_number=model_number,
        resolution=4096,
        registers=STS_CONTROL_TABLE,
        eeprom_end=STS_EEPROM_END,
        baudrates=STS_BAUDRATES,
        sign_bits=STS_SIGN_BITS,
        twos_complement=frozenset(),
        factory=STS_FACTORY,
    )


def _scs(name: str, model_number: int) -> ServoModel:
    return ServoModel(
        name=name,
        family=Family.FEETECH,
        model_number=model_number,
        resolution=1024,
        registers=SCS_CONTROL_TABLE,
        eeprom_end=STS_EEPROM_END,
        baudrates=STS_BAUDRATES,
        sign_bits=MappingProxyType({}),
        twos_complement=frozenset(),
        factory=SCS_FACTORY,
        protocol=1,
    )


def _x_series(name: str, model_number: int) -> ServoModel:
    return ServoModel(
        name=name,
        family=Family.DYNAMIXEL,
        model_number=model_number,
        resolution=4096,
        registers=X_SERIES_CONTROL_TABLE,
        eeprom_end=X_SERIES_EEPROM_END,
        baudrates=X_SERIES_BAUDRATES,
        sign_bits=MappingProxyType({}),
        twos_complement=X_SERIES_SIGNED,
        factory=X_SERIES_FACTORY,
    )


# Feetech's SCS0009 speaks protocol 1 (`ServoModel.protocol`): a bus holds models of one protocol.
MODELS: Mapping[str, ServoModel] = MappingProxyType(
    {
        "sts3215": _sts("sts3215", 777),
        "sts3250": _sts("sts3250", 2825),
        "sm8512bl": _sts("sm8512bl", 11272),
        "scs0009": _scs("scs0009", 1284),
        "xl330-m077": _x_series("xl330-m077", 1190),
        "xl330-m288": _x_series("xl330-m288", 1200),
        "xl430-w250": _x_series("xl430-w250", 1060),
        "xm430-w350": _x_series("xm430-w350", 1020),
        "xm540-w270": _x_series("xm540-w270", 1120),
        "xc430-w150": _x_series("xc430-w150", 1070),
        "xh540-w150": _x_series("xh540-w150", 1110),
        "xc330-t288": _x_series("xc330-t288", 1220),
        "xc330-t181": _x_series("xc330-t181", 1210),
    }
)


def servo_model(name: str, family: Family | None = None) -> ServoModel:
    """The model called `name`, checked to belong to `family` when given."""
    model = MODELS.get(name)
    candidates = [m for m in MODELS.values() if family is None or m.family is family]
    if model is None or (family is not None and model.family is not family):
        raise InvalidInput(
            f"unknown {family or 'servo'} model {name!r}",
            hint=f"known models: {', '.join(m.name for m in candidates)}",
        )
    return model


def model_name_of_number(number: int, family: Family) -> str | None:
    return next(
        (m.name for m in MODELS.values() if m.family is family and m.model_number == number), None
    )
