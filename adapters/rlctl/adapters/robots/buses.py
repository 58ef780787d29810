"""Motor buses for arm adapters, with a clear message when a vendor SDK is not installed."""

from __future__ import annotations

from collections.abc import Mapping

from rlctl.application.ports.motors import MotorBus
from rlctl.domain.errors import NotSupported
from rlctl.domain.motors import Motor


def feetech_bus(port: str, motors: Mapping[str, Motor], *, retries: int = 2) -> MotorBus:
    try:
        from rlctl.adapters.motors.feetech import FeetechMotorBus
    except ImportError as error:
        raise _missing("Feetech", "feetech", error) from error
    return FeetechMotorBus(port, motors, retries=retries)


def dynamixel_bus(port: str, motors: Mapping[str, Motor], *, retries: int = 2) -> MotorBus:
    try:
        from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
    except ImportError as error:
        raise _missing("Dynamixel", "dynamixel", error) from error
    return DynamixelMotorBus(port, motors, retries=retries)


def _missing(vendor: str, extra: str, error: ImportError) -> NotSupported:
    return NotSupported(
        f"the {vendor} SDK is not installed ({error.name or error})",
        hint=f"install it: pip install 'rlctl[{extra}]'",
    )
