"""Motor buses for arm adapters, picked by name through the `rlctl.motors` registry, with a
clear message when a vendor library is not installed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlctl.adapters.motors.config import MOTOR_BUS_TYPES
from rlctl.application.ports.motors import MotorBus
from rlctl.domain.motors import Motor


def motor_bus(bus_type: str, motors: Mapping[str, Motor], **settings: Any) -> MotorBus:
    """The bus of type `bus_type` (`feetech`, `dynamixel`, a plugin's) for `motors`; `settings` are
    its config's fields (`port=...`)."""
    return MOTOR_BUS_TYPES.make(bus_type, **settings).build(motors)


def feetech_bus(port: str, motors: Mapping[str, Motor], *, retries: int = 2) -> MotorBus:
    return motor_bus("feetech", motors, port=port, retries=retries)


def dynamixel_bus(port: str, motors: Mapping[str, Motor], *, retries: int = 2) -> MotorBus:
    return motor_bus("dynamixel", motors, port=port, retries=retries)
