"""Bimanual OpenArm followers: two OpenArms, each on its own CAN interface.

    --robot.type=bi_openarm_follower \\
        --robot.left_arm_config.port=can0 --robot.left_arm_config.side=left \\
        --robot.right_arm_config.port=can1 --robot.right_arm_config.side=right

LeRobot 0.6.1's settings and names: each arm is an `openarm_follower` calibrated as `<id>_left` /
`<id>_right` (the id defaults to `bi_openarm_follower`), features `left_joint_1.pos` …
`right_gripper.pos`, and a dataset's `robot_type` is `bi_openarm_follower`. Each half of an
action passes its own arm's safety guard.
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
from rlctl.adapters.robots.config import BiOpenArmFollowerConfig
from rlctl.adapters.robots.openarm_follower import openarm_follower
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import CalibrationStore

ROBOT_TYPE = "bi_openarm_follower"


def bi_openarm_follower(
    config: BiOpenArmFollowerConfig,
    *,
    calibration_store: CalibrationStore,
    cameras: Mapping[str, Camera] | None = None,
) -> BimanualFollower:
    require_bimanual_id(config.id, "robot")
    require_two_ports(config.left_arm_config.port, config.right_arm_config.port, "robot")
    sizes = {name: camera.frame_size(name) for name, camera in config.cameras.items()}
    arms = {
        side: openarm_follower(config.arm(side), calibration_store=calibration_store)
        for side in SIDES
    }
    return BimanualFollower(
        arms["left"],
        arms["right"],
        cameras if cameras is not None else build_cameras(config.cameras),
        sizes,
        robot_type=ROBOT_TYPE,
    )
