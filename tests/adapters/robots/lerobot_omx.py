"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

    python lerobot_omx.py JOB.json

`JOB`: {"calibrated": {"follower", "leader"}, "fresh": {"follower", "leader"}}, each a virtual
Dynamixel bus's port, with HF_LEROBOT_CALIBRATION set to the folder rlctl calibrated into.
LeRobot 0.6.1's own `OmxFollower` / `OmxLeader`, on its own Dynamixel bus, connect to the arms
rlctl calibrated (ids `f`, `l`) without calibrating, and calibrate the fresh ones (ids `g`, `m`)
as they do on first connect. Prints one JSON line: for each arm, the calibration file LeRobot
loaded or wrote and where, whether the motors held it, and the joints it read.
"""

import json
import sys
from pathlib import Path

from dynamixel_sdk import port_handler
from lerobot.robots.omx_follower import OmxFollower, OmxFollowerConfig
from lerobot.teleoperators.omx_leader import OmxLeader, OmxLeaderConfig

# Replies through a pty are late on a loaded 2-core machine (the virtual motors answer from the
# test's process): the SDK waits longer for each, as rlctl's tests give their own bus a margin.
port_handler.LATENCY_TIMER = 250


def probe(device, *, calibrate: bool) -> dict:
    device.connect(calibrate=calibrate)
    try:
        calibrated = device.is_calibrated
        read = device.get_observation() if isinstance(device, OmxFollower) else device.get_action()
    finally:
        device.disconnect()
    return {
        "name": device.name,
        "path": str(device.calibration_fpath),
        "calibration": {m: vars(c) for m, c in device.calibration.items()},
        "is_calibrated": calibrated,
        "read": read,
    }


def main(job: dict) -> dict:
    ours, fresh = job["calibrated"], job["fresh"]
    return {
        "follower": probe(
            OmxFollower(OmxFollowerConfig(port=ours["follower"], id="f")), calibrate=False
        ),
        "leader": probe(OmxLeader(OmxLeaderConfig(port=ours["leader"], id="l")), calibrate=False),
        "fresh_follower": probe(
            OmxFollower(OmxFollowerConfig(port=fresh["follower"], id="g")), calibrate=True
        ),
        "fresh_leader": probe(
            OmxLeader(OmxLeaderConfig(port=fresh["leader"], id="m")), calibrate=True
        ),
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(Path(sys.argv[1]).read_text()))))
