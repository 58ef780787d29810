"""What robot and teleoperator configs share, as LeRobot's do: the device's `id` and
`calibration_dir`, and the adapter that builds the device from its config.

Importing this module is cheap: the adapter's module is imported when a device is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from rlctl.domain.config import type_name_of
from rlctl.domain.plugins import load_adapter

if TYPE_CHECKING:
    from rlctl.application.ports.robot import CalibrationKey, CalibrationStore, Robot
    from rlctl.application.ports.teleoperator import Teleoperator


@attrs.frozen(kw_only=True)
class DeviceConfig:
    # Names the calibration file (`<id>.json`) and tells arms of one type apart.
    id: str | None = None
    # Replaces `$HF_LEROBOT_CALIBRATION/<kind>/<type>` as the calibration folder (the kind is
    # `robots` or `teleoperators`).
    calibration_dir: str | None = None

    type_name: ClassVar[str]
    # "package.module:factory", called as factory(config, calibration_store=...).
    adapter: ClassVar[str]
    # LeRobot's calibration folder for this kind of device.
    calibration_kind: ClassVar[Literal["robots", "teleoperators"]]

    def build(self, calibration_store: CalibrationStore) -> Robot | Teleoperator:
        return self._make(calibration_store)

    def _make(self, calibration_store: CalibrationStore) -> Any:
        # What the factory returns is the subclass's `build` type: a Robot or a Teleoperator.
        factory = load_adapter(self.adapter, part=f"{self.calibration_kind[:-1]} {_name(self)}")
        return factory(self, calibration_store=calibration_store)

    def calibration_key(self, device_type: str) -> CalibrationKey:
        """This device's calibration file. `device_type` is LeRobot's name for the arm, which
        one config type may share with another (`so_follower` for SO-100 and SO-101)."""
        from rlctl.application.ports.robot import CalibrationKey

        return CalibrationKey(self.calibration_kind, device_type, self.id, self.calibration_dir)


def _name(config: DeviceConfig) -> str:
    return type_name_of(config) or type(config).__name__
