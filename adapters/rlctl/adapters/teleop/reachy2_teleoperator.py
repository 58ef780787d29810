"""`--teleop.type=reachy2_teleoperator`: a Reachy 2 read as a teleoperator, as LeRobot 0.6.1's
`Reachy2Teleoperator`: the joints' goal positions (`use_present_position`: present ones) in
degrees and the base's last commanded velocity (measured odometry), under the `reachy2` robot's
action names. Pollen's VR teleoperation app drives the robot; recording with this teleoperator
and `--robot.use_external_commands=true` keeps what it commanded.

A reading that fails (the server slow or gone, a part not answering) is one `HardwareError`
naming the part and the host: a teleoperator must not repeat stale commands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlctl.adapters.robots.reachy2_link import Link, Parts, PartUnanswered
from rlctl.adapters.teleop.config import Reachy2TeleoperatorConfig
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import action_feature
from rlctl.domain.errors import HardwareError
from rlctl.domain.features import FeatureSpec

TELEOP_TYPE = "reachy2_teleoperator"


class Reachy2Teleoperator:
    def __init__(self, config: Reachy2TeleoperatorConfig) -> None:
        self.config = config
        self.parts = Parts.of(config)
        self.joints = self.parts.joints()
        self.names = self.parts.names()
        self.where = f"{TELEOP_TYPE} {config.ip_address}:{config.sdk_port}"
        self._link: Link | None = None

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> Mapping[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self.names)}

    @property
    def is_connected(self) -> bool:
        return self._link is not None

    def connect(self) -> None:
        if self._link is not None:
            return
        config = self.config
        assert config.ip_address is not None  # the config refuses an empty one
        link = Link(config.ip_address, config.sdk_port, config.request_timeout_s, TELEOP_TYPE)
        needed = list(self.parts.api_parts())
        for side in ("l_arm", "r_arm"):
            if side in needed:
                needed.append(f"{side[0]}_hand")
        connect_timeout_s = max(1.0, 3 * config.request_timeout_s)
        link.open(connect_timeout_s, needed)
        self._link = link
        try:
            with link.connecting(connect_timeout_s):
                self._read()
        except HardwareError:
            self.disconnect()
            raise

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        pass

    def _read(self) -> np.ndarray:
        link = self._link
        if link is None:
            raise HardwareError(
                "the Reachy 2 teleoperator is not connected", where=self.where, hint="connect it"
            )
        which = "present_position" if self.config.use_present_position else "goal_position"
        try:
            state = link.state(list(self.parts.api_parts()))
            values = link.joint_values(state, self.joints, which)
            if self.parts.mobile_base:
                values.extend(
                    link.odometry() if self.config.use_present_position else link.last_direction()
                )
        except PartUnanswered as error:
            raise HardwareError(
                error.describe(str(self.config.ip_address), self.config.sdk_port),
                where=self.where,
                hint=link.hint(),
            ) from error
        action = np.asarray(values, dtype=np.float64)
        bad = ~np.isfinite(action)
        if bad.any():
            names = [self.names[i] for i in np.flatnonzero(bad)]
            raise HardwareError(
                f"the Reachy 2 gives no {which.replace('_', ' ')} for {', '.join(names)}",
                where=self.where,
                hint="check the robot's services; a part it lacks is left out with its with_* flag",
            )
        return action.astype(np.float32)

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        return self._read()

    def disconnect(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            link.close()


def reachy2_teleoperator(
    config: Reachy2TeleoperatorConfig, *, calibration_store: CalibrationStore | None = None
) -> Reachy2Teleoperator:
    return Reachy2Teleoperator(config)
