"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON) with `motorbridge` and
`motorbridge-smart-servo` importable, never imported by rlctl's tests.

    python lerobot_rebot.py follower PORT CALIBRATION_DIR   # Damiao's bridge's serial port
    python lerobot_rebot.py leader PORT CALIBRATION_DIR     # the leader's serial port

LeRobot 0.6.1's own `RebotB601Follower` (through motorbridge's Damiao serial bridge) or
`RebotArm102Leader` (through motorbridge-smart-servo) connects with the calibration rlctl saved
(id `lab` / `hand`); the follower is sent one action and read, the leader read. Prints one JSON
line: the calibration LeRobot loaded and the positions it read.
"""

import json
import sys
import time
from pathlib import Path

ACTION = {
    "shoulder_pan.pos": 12.0,
    "shoulder_lift.pos": -25.0,
    "elbow_flex.pos": -40.0,
    "wrist_flex.pos": 15.0,
    "wrist_yaw.pos": -5.0,
    "wrist_roll.pos": 7.0,
    "gripper.pos": -120.0,
}


def main() -> None:
    kind, port, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if kind == "follower":
        from lerobot.robots.rebot_b601_follower import (
            RebotB601Follower,
            RebotB601FollowerRobotConfig,
        )

        config = RebotB601FollowerRobotConfig(port=port, id="lab", calibration_dir=folder)
        device = RebotB601Follower(config)
        device.connect(calibrate=False)
        sent = device.send_action(ACTION)
        time.sleep(0.05)
        read = {k: float(v) for k, v in device.get_observation().items()}
    else:
        from lerobot.teleoperators.rebot_102_leader import (
            RebotArm102Leader,
            RebotArm102LeaderTeleopConfig,
        )

        config = RebotArm102LeaderTeleopConfig(port=port, id="hand", calibration_dir=folder)
        device = RebotArm102Leader(config)
        device.connect(calibrate=False)
        sent = {}
        read = {k: float(v) for k, v in device.get_action().items()}
    calibration = {k: vars(v) for k, v in device.calibration.items()}
    device.disconnect()
    print(json.dumps({"calibration": calibration, "sent": sent, "read": read}))


if __name__ == "__main__":
    main()
