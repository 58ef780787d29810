"""LeRobot 0.6.1's own `UnitreeG1` and rlctl's `unitree_g1` against the same emulated bridge
(`g1_bridge.py`): the same features, the same joints read from the same state, and, for the same
action, the same command message on the wire.

Opt-in (`RLCTL_LEROBOT_PYTHON`). LeRobot's environment lacks pyzmq (its `unitree_g1` extra) and
Unitree's SDK (not on PyPI), which `UnitreeG1` requires even on the bridge path, where it only
builds the SDK's empty `LowCmd_` message and its CRC (the bridge recomputes the CRC). So the
LeRobot process gets rlctl's pyzmq and a stand-in for those two SDK pieces: `LowCmd_` with the
IDL's fields and 35 zeroed motor entries, a CRC of 0 (not compared)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import zmq

from rlctl.adapters.robots.config import UnitreeG1Config
from rlctl.adapters.robots.unitree_g1 import UnitreeG1Robot
from rlctl.adapters.robots.unitree_g1_joints import FEATURE_NAMES

from .g1_bridge import EmulatedBridge

HERE = Path(__file__).parent

_STANDIN = {
    "unitree_sdk2py/__init__.py": "",
    "unitree_sdk2py/core/__init__.py": "",
    "unitree_sdk2py/core/channel.py": (
        "def _dds(*args, **kwargs):\n"
        "    raise RuntimeError('DDS is not in this stand-in: bridge path only')\n"
        "ChannelFactoryInitialize = ChannelPublisher = ChannelSubscriber = _dds\n"
    ),
    "unitree_sdk2py/idl/__init__.py": "",
    "unitree_sdk2py/idl/default.py": (
        "from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, MotorCmd_\n"
        "def unitree_hg_msg_dds__LowCmd_():\n"
        "    return LowCmd_(0, 0, [MotorCmd_(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0) for _ in range(35)],"
        " [0, 0, 0, 0], 0)\n"
    ),
    "unitree_sdk2py/idl/unitree_hg/__init__.py": "",
    "unitree_sdk2py/idl/unitree_hg/msg/__init__.py": "",
    "unitree_sdk2py/idl/unitree_hg/msg/dds_/__init__.py": (
        "class MotorCmd_:\n"
        "    def __init__(self, mode, q, dq, tau, kp, kd, reserve):\n"
        "        self.mode, self.q, self.dq, self.tau = mode, q, dq, tau\n"
        "        self.kp, self.kd, self.reserve = kp, kd, reserve\n"
        "class LowCmd_:\n"
        "    def __init__(self, mode_pr, mode_machine, motor_cmd, reserve, crc):\n"
        "        self.mode_pr, self.mode_machine = mode_pr, mode_machine\n"
        "        self.motor_cmd = motor_cmd\n"
        "        self.reserve, self.crc = reserve, crc\n"
        "class LowState_:\n"
        "    pass\n"
    ),
    "unitree_sdk2py/utils/__init__.py": "",
    "unitree_sdk2py/utils/crc.py": "class CRC:\n    def Crc(self, msg):\n        return 0\n",
    "unitree_sdk2py-0.0.0.dist-info/METADATA": (
        "Metadata-Version: 2.1\nName: unitree-sdk2py\nVersion: 0.0.0\n"
    ),
}


def lerobot_path(root: Path) -> str:
    """A folder with rlctl's pyzmq and the SDK stand-in, for LeRobot's PYTHONPATH."""
    for name, text in _STANDIN.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    site = Path(zmq.__file__).parent.parent
    for entry in site.iterdir():
        if entry.name == "zmq" or entry.name.startswith("pyzmq"):
            (root / entry.name).symlink_to(entry)
    return str(root)


@pytest.mark.lerobot
@pytest.mark.timeout(300)
def test_lerobots_g1_and_ours_read_the_same_state_and_send_the_same_command(lerobot, tmp_path):
    rng = np.random.default_rng(3)
    start = np.array([0.01 * i for i in range(29)])
    action = start + rng.uniform(-0.2, 0.2, 29)
    env = {**os.environ, "PYTHONPATH": lerobot_path(tmp_path / "path")}
    with EmulatedBridge() as bridge:
        theirs = lerobot(
            HERE / "lerobot_g1.py",
            bridge.lowcmd_port,
            bridge.lowstate_port,
            json.dumps(action.tolist()),
            timeout=120,
            env=env,
        )
        lerobot_commands = list(bridge.commands)
    assert theirs["action_features"] == list(FEATURE_NAMES)
    assert theirs["observation_features"] == list(FEATURE_NAMES)
    assert theirs["q"] == pytest.approx(start.tolist(), abs=1e-12)
    # LeRobot sent the action, then its zero-gain command on disconnect.
    assert len(lerobot_commands) == 2, lerobot_commands

    with EmulatedBridge() as bridge:
        robot = UnitreeG1Robot(
            UnitreeG1Config(
                is_simulation=False,
                robot_ip="127.0.0.1",
                lowcmd_port=bridge.lowcmd_port,
                lowstate_port=bridge.lowstate_port,
            )
        )
        robot.connect()
        state = robot.get_observation()["observation.state"]
        robot.send_action(action)
        bridge.wait_for_commands(1)
        time.sleep(0.1)
        robot.disconnect()
        ours = bridge.wait_for_commands(2)
    assert state == pytest.approx(np.asarray(theirs["q"], dtype=np.float32))
    assert len(ours) == 2, ours
    for mine, lerobots in zip(ours, lerobot_commands, strict=True):
        assert mine["topic"] == lerobots["topic"]
        assert mine["data"]["mode_pr"] == lerobots["data"]["mode_pr"]
        assert mine["data"]["mode_machine"] == lerobots["data"]["mode_machine"] == 5
        pairs = zip(mine["data"]["motor_cmd"], lerobots["data"]["motor_cmd"], strict=True)
        for i, (a, b) in enumerate(pairs):
            assert set(a) == set(b), (i, a, b)
            for key in ("mode", "dq", "kp", "kd", "tau"):
                assert a[key] == b[key], (i, key, a, b)
            # rlctl sends float32 goals (what the guard let through, as recorded).
            assert a["q"] == pytest.approx(b["q"], abs=1e-6), (i, a, b)
