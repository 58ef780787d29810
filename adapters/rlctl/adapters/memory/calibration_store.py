"""Calibrations kept in a dict, keyed like LeRobot's files."""

from __future__ import annotations

from rlctl.application.ports.robot import CalibrationKey
from rlctl.domain.calibration import Calibration


class InMemoryCalibrationStore:
    def __init__(self, saved: dict[CalibrationKey, Calibration] | None = None) -> None:
        self.saved: dict[CalibrationKey, Calibration] = dict(saved or {})

    def load(self, key: CalibrationKey) -> Calibration | None:
        return self.saved.get(key)

    def save(self, key: CalibrationKey, calibration: Calibration) -> str:
        self.saved[key] = calibration
        return f"memory://calibration/{key.kind}/{key.type}/{key.id}.json"
