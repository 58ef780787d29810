"""Motors as a robot describes them: which id on the bus, which model, how positions are shown."""

from __future__ import annotations

import attrs

from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.errors import InvalidInput

# Both Feetech and Dynamixel reserve 253 (Dynamixel's header byte) and 254 (broadcast).
MAX_MOTOR_ID = 252


def _check_id(_: Motor, __: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MOTOR_ID:
        raise InvalidInput(f"a motor id is an integer in [0, {MAX_MOTOR_ID}], got {value!r}")


@attrs.frozen
class Motor:
    """One motor of a robot: its bus `id`, its `model` name ("sts3215", "xl430-w250", …) and the
    unit its positions are given in (degrees, -100..100, or 0..100 for grippers)."""

    id: int = attrs.field(validator=_check_id)
    model: str
    norm_mode: MotorNormMode = attrs.field(converter=MotorNormMode)
