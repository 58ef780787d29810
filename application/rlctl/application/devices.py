"""Connecting robots and teleoperators before a loop, and always letting go of them after.

The teleoperator connects first, so that the robot is not left holding torque while a leader arm
is being set up (LeRobot's order). An arm with no saved calibration is calibrated on the spot
when a `calibrate` procedure is given, else refused with the command that fixes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import structlog

from rlctl.application.ports.robot import CalibrationTarget, Robot
from rlctl.application.ports.teleoperator import Teleoperator
from rlctl.domain.errors import CalibrationError

log = structlog.get_logger(__name__)

Calibrate = Callable[[CalibrationTarget], Any]


def connect_devices(
    robot: Robot, teleop: Teleoperator | None = None, calibrate: Calibrate | None = None
) -> None:
    if teleop is not None:
        teleop.connect()
        ensure_calibrated(teleop.calibration_targets(), calibrate, flag="teleop")
    robot.connect()
    ensure_calibrated(robot.calibration_targets(), calibrate, flag="robot")


def ensure_calibrated(
    targets: Iterable[CalibrationTarget], calibrate: Calibrate | None, *, flag: str
) -> None:
    for target in targets:
        if target.is_calibrated:
            continue
        if calibrate is None:
            key = target.calibration_key
            raise CalibrationError(
                "no calibration saved for this arm",
                where=key.label,
                hint=f"run `rlctl calibrate --{flag}.type=... --{flag}.port={target.bus.port} "
                f"--{flag}.id={key.id}` first",
            )
        calibrate(target)


def disconnect_devices(*devices: Robot | Teleoperator | None) -> None:
    """Disconnect each device; a failure is logged and does not keep the others connected."""
    for device in devices:
        if device is None or not device.is_connected:
            continue
        try:
            device.disconnect()
        except Exception as error:
            log.warning("disconnect failed", device=type(device).__name__, error=str(error))
