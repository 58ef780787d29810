"""Run with LeRobot 0.6.1's Python: LeRobot's own `UnitreeG1` (`is_simulation=False`) against the
emulated bridge whose ports are given, connected, read, sent one action and disconnected.

    python lerobot_g1.py LOWCMD_PORT LOWSTATE_PORT ACTION_JSON

LeRobot's bridge ports are fixed module constants (6000, 6001); they are set to the emulated
bridge's free ports before connecting, nothing else of LeRobot is changed. Unitree's SDK is not
on PyPI: the test puts a stand-in on the path (its message containers and CRC only, which is all
the bridge path of `UnitreeG1` uses). Prints the observation, the features and the action sent.
"""

from __future__ import annotations

import json
import sys
import time

from lerobot.robots.unitree_g1 import UnitreeG1, UnitreeG1Config, unitree_sdk2_socket

lowcmd_port, lowstate_port, action_json = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
unitree_sdk2_socket.LOWCMD_PORT = lowcmd_port
unitree_sdk2_socket.LOWSTATE_PORT = lowstate_port

robot = UnitreeG1(UnitreeG1Config(is_simulation=False, robot_ip="127.0.0.1"))
robot.connect()
observation = robot.get_observation()
names = list(robot.action_features)
action = dict(zip(names, json.loads(action_json), strict=True))
robot.send_action(action)
time.sleep(0.3)  # the PUSH socket delivers before the zero-gain command replaces it
robot.disconnect()
print(
    json.dumps(
        {
            "observation_features": list(robot.observation_features),
            "action_features": names,
            "q": [float(observation[f"{name}"]) for name in robot.observation_features],
        }
    )
)
