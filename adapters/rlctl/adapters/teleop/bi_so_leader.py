"""Bimanual SO-100 / SO-101 leaders: two SO leader arms, each on its own motors board.

    --teleop.type=bi_so_leader --teleop.id=duo \\
        --teleop.left_arm_config.port=/dev/ttyACM2 --teleop.right_arm_config.port=/dev/ttyACM3

Each arm is an `so_leader` calibrated as `<id>_left` / `<id>_right`, as LeRobot 0.6.1 does it.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlctl.adapters.robots.bimanual import SIDES, require_bimanual_id, require_two_ports
from rlctl.adapters.teleop.bimanual_leader import BimanualLeader
from rlctl.adapters.teleop.config import BiSOLeaderConfig
from rlctl.adapters.teleop.so_leader import so_leader
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationStore

TELEOP_TYPE = "bi_so_leader"


def bi_so_leader(
    config: BiSOLeaderConfig,
    *,
    calibration_store: CalibrationStore,
    buses: Mapping[str, MotorBus] | None = None,
) -> BimanualLeader:
    require_bimanual_id(config.id, "teleop")
    require_two_ports(config.left_arm_config.port, config.right_arm_config.port, "teleop")
    arms = {
        side: so_leader(
            config.arm(side), calibration_store=calibration_store, bus=(buses or {}).get(side)
        )
        for side in SIDES
    }
    return BimanualLeader(arms["left"], arms["right"], teleop_type=TELEOP_TYPE)
