"""Bimanual SO-100 / SO-101 followers: two SO follower arms, each on its own motors board.

    --robot.type=bi_so_follower --robot.id=duo \\
        --robot.left_arm_config.port=/dev/ttyACM0 --robot.right_arm_config.port=/dev/ttyACM1

LeRobot 0.6.1's settings and names: each arm is an `so_follower` calibrated as `<id>_left` /
`<id>_right` (`calibration/robots/so_follower/duo_left.json`), so arms calibrated by LeRobot work
here and the other way round, and a dataset's `robot_type` is `bi_so_follower`.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlctl.adapters.cameras.config import build_cameras
from rlctl.adapters.robots.bimanual import (
    SIDES,
    BimanualFollower,
    require_bimanual_id,
    require_two_ports,
)
from rlctl.adapters.robots.config import BiSOFollowerConfig
from rlctl.adapters.robots.so_follower import so_follower
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.motors import MotorBus
from rlctl.application.ports.robot import CalibrationStore

ROBOT_TYPE = "bi_so_follower"


def bi_so_follower(
    config: BiSOFollowerConfig,
    *,
    calibration_store: CalibrationStore,
    buses: Mapping[str, MotorBus] | None = None,
    cameras: Mapping[str, Camera] | None = None,
) -> BimanualFollower:
    """`buses` ("left", "right") and `cameras` (the robot's own) replace the configured ones
    (fakes in tests)."""
    require_bimanual_id(config.id, "robot")
    require_two_ports(config.left_arm_config.port, config.right_arm_config.port, "robot")
    sizes = {name: camera.frame_size(name) for name, camera in config.cameras.items()}
    arms = {
        side: so_follower(
            config.arm(side),
            calibration_store=calibration_store,
            bus=(buses or {}).get(side),
            label=f"{ROBOT_TYPE} {side} arm",
        )
        for side in SIDES
    }
    return BimanualFollower(
        arms["left"],
        arms["right"],
        cameras if cameras is not None else build_cameras(config.cameras),
        sizes,
        robot_type=ROBOT_TYPE,
    )
