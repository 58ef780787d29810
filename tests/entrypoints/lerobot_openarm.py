"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

    python lerobot_openarm.py JOB.json

`JOB`: {"dataset_root", "out", "robot_id", "side"}, with HF_LEROBOT_CALIBRATION set to the folder
rlctl calibrated into. LeRobot 0.6.1's own `OpenArmFollower` is built (its Damiao bus replaced by
a stand-in holding the motor table: no CAN interface is needed to find, load and name a
calibration), and LeRobot's `LeRobotDataset` reads the dataset. Prints one JSON line: the arm's
features, the dataset features LeRobot would record them under, the calibration it loaded and
from where, the dataset's metadata; every item goes to the .npz `out` (`i/<key>`).
"""

import json
import sys
from pathlib import Path

from lerobot.robots.openarm_follower import OpenArmFollower, OpenArmFollowerConfig
from lerobot.robots.openarm_follower import openarm_follower as openarm_module
from lerobot.utils.feature_utils import hw_to_dataset_features
from lerobot_dataset_items import read_dataset


class MotorTable:
    """What LeRobot's arm reads of its bus before connecting: the motors and calibration."""

    def __init__(self, port, motors, calibration=None, **_):
        self.port = port
        self.motors = motors
        self.calibration = calibration

    @property
    def is_calibrated(self) -> bool:
        return bool(self.calibration)


openarm_module.DamiaoMotorsBus = MotorTable


def main(job: dict) -> dict:
    robot = OpenArmFollower(
        OpenArmFollowerConfig(port="can0", id=job["robot_id"], side=job["side"])
    )
    recorded = {
        **hw_to_dataset_features(robot.action_features, "action"),
        **hw_to_dataset_features(robot.observation_features, "observation"),
    }
    return {
        "robot": {
            "name": robot.name,
            "action": list(robot.action_features),
            "dataset_features": {k: v.get("names") for k, v in recorded.items()},
            "calibration_path": str(robot.calibration_fpath),
            "calibration": {m: vars(c) for m, c in robot.calibration.items()},
            "is_calibrated": robot.is_calibrated,
            "joint_limits": {k: list(v) for k, v in robot.config.joint_limits.items()},
        },
        "dataset": read_dataset("rlctl/openarm", job["dataset_root"], job["out"]),
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(Path(sys.argv[1]).read_text()))))
