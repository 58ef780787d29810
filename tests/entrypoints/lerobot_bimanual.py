"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

    python lerobot_bimanual.py JOB.json

`JOB`: {"dataset_root", "out", "follower_id", "leader_id"}, with HF_LEROBOT_CALIBRATION set to
the folder rlctl calibrated into. LeRobot 0.6.1's own `BiSOFollower` and `BiSOLeader` are built
(their motor bus replaced by a stand-in that holds the motor table: the Feetech SDK is not needed
to find, load and name calibrations), and LeRobot's `LeRobotDataset` reads the dataset. Prints
one JSON line: the devices' feature names, the dataset features LeRobot would record them
under, the calibrations each arm loaded and from where, the dataset's metadata; every item goes
to the .npz `out` (`i/<key>`).
"""

import json
import sys
from pathlib import Path

from lerobot.robots.bi_so_follower import BiSOFollower, BiSOFollowerConfig
from lerobot.robots.so_follower import SOFollowerConfig
from lerobot.robots.so_follower import so_follower as so_follower_module
from lerobot.teleoperators.bi_so_leader import BiSOLeader, BiSOLeaderConfig
from lerobot.teleoperators.so_leader import SOLeaderConfig
from lerobot.teleoperators.so_leader import so_leader as so_leader_module
from lerobot.utils.feature_utils import hw_to_dataset_features
from lerobot_dataset_items import read_dataset


class MotorTable:
    """What LeRobot's arms read of their bus before connecting: the motors and calibration."""

    def __init__(self, port, motors, calibration=None, **_):
        self.port = port
        self.motors = motors
        self.calibration = calibration


so_follower_module.FeetechMotorsBus = MotorTable
so_leader_module.FeetechMotorsBus = MotorTable


def arms(device) -> dict:
    return {
        side: {
            "path": str(arm.calibration_fpath),
            "calibration": {m: vars(c) for m, c in arm.calibration.items()},
        }
        for side, arm in (("left", device.left_arm), ("right", device.right_arm))
    }


def main(job: dict) -> dict:
    robot = BiSOFollower(
        BiSOFollowerConfig(
            id=job["follower_id"],
            left_arm_config=SOFollowerConfig(port="/dev/left"),
            right_arm_config=SOFollowerConfig(port="/dev/right"),
        )
    )
    leader = BiSOLeader(
        BiSOLeaderConfig(
            id=job["leader_id"],
            left_arm_config=SOLeaderConfig(port="/dev/left-leader"),
            right_arm_config=SOLeaderConfig(port="/dev/right-leader"),
        )
    )
    recorded = {
        **hw_to_dataset_features(robot.action_features, "action"),
        **hw_to_dataset_features(robot.observation_features, "observation"),
    }
    return {
        "robot": {
            "name": robot.name,
            "action": list(robot.action_features),
            "observation": list(robot.observation_features),
            "dataset_features": {k: v.get("names") for k, v in recorded.items()},
            "arms": arms(robot),
        },
        "leader": {
            "name": leader.name,
            "action": list(leader.action_features),
            "arms": arms(leader),
        },
        "dataset": read_dataset("rlctl/bimanual", job["dataset_root"], job["out"]),
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(Path(sys.argv[1]).read_text()))))
