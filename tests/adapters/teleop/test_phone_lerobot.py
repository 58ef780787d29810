"""rlctl's phone arithmetic and end-effector steps against LeRobot 0.6.1's own, on the same poses,
messages and joints (opt-in: RLCTL_LEROBOT_PYTHON). LeRobot's venv has neither placo nor the
`teleop` package, so both sides run one stub kinematics (numpy) and are fed the 4x4 poses the
`teleop` package passes on; what is compared is everything after: `AndroidPhone`'s calibration
and action, and the five steps of LeRobot's phone_to_so100 example."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from rlctl.adapters.kinematics.ee_steps import (
    EEBoundsAndSafety,
    EEReferenceAndDelta,
    GripperVelocityToJoint,
    InverseKinematicsEEToJoints,
)
from rlctl.adapters.teleop.phone import AndroidPhone, MapPhoneActionToRobotAction

from .conftest import MOTORS

pytestmark = pytest.mark.lerobot

STUB = '''
import math
import numpy as np

class StubKinematics:
    """FK: position q[:3] / 100 m, turned q[3] degrees about z. IK: its inverse, the rest kept."""
    joint_names = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll",
                   "gripper"]

    def forward_kinematics(self, q):
        q = np.asarray(q, dtype=float)
        c, s = math.cos(math.radians(q[3])), math.sin(math.radians(q[3]))
        t = np.eye(4)
        t[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
        t[:3, 3] = q[:3] / 100
        return t

    def inverse_kinematics(self, current, desired, position_weight=1.0, orientation_weight=0.01):
        out = np.asarray(current, dtype=float).copy()
        out[:3] = desired[:3, 3] * 100
        out[3] = math.degrees(math.atan2(desired[1, 0], desired[0, 0]))
        return out
'''

LEROBOT = (
    STUB
    + """
import json, sys, threading
from lerobot.processor import TransitionKey
from lerobot.processor.converters import create_transition
from lerobot.robots.so_follower.robot_kinematic_processor import (
    EEBoundsAndSafety, EEReferenceAndDelta, GripperVelocityToJoint, InverseKinematicsEEToJoints)
from lerobot.teleoperators.phone.config_phone import PhoneConfig, PhoneOS
from lerobot.teleoperators.phone.phone_processor import MapPhoneActionToRobotAction
from lerobot.teleoperators.phone.teleop_phone import AndroidPhone

data = json.loads(sys.argv[1])
motors = data["motors"]
phone = AndroidPhone.__new__(AndroidPhone)  # its __init__ asks for hebi-py and teleop
phone.config = PhoneConfig(phone_os=PhoneOS.ANDROID)
phone._teleop = object()
phone._teleop_thread = None
phone._latest_pose = None
phone._latest_message = None
phone._android_lock = threading.Lock()
phone._calib_pos = phone._calib_rot_inv = None
phone._enabled = False
kin = StubKinematics()
steps = [
    MapPhoneActionToRobotAction(platform=PhoneOS.ANDROID),
    EEReferenceAndDelta(kinematics=kin, end_effector_step_sizes={"x": 0.5, "y": 0.5, "z": 0.5},
                        motor_names=motors, use_latched_reference=True),
    EEBoundsAndSafety(end_effector_bounds={"min": [-0.3, -0.3, 0.0], "max": [0.3, 0.3, 0.4]},
                      max_ee_step_m=0.02, raise_on_jump=False),
    GripperVelocityToJoint(speed_factor=20.0),
    InverseKinematicsEEToJoints(kinematics=kin, motor_names=motors,
                                initial_guess_current_joints=True),
]
out = []
for i, (pose, msg, q) in enumerate(zip(data["poses"], data["messages"], data["joints"])):
    phone._android_callback(np.array(pose), msg)
    if i == 0:  # calibrate(): the first message has move down
        ok, pos, rot, _ = phone._read_current_pose()
        phone._calib_pos, phone._calib_rot_inv, phone._enabled = pos.copy(), rot.inv(), False
    action = phone.get_action()
    record = {"pos": action["phone.pos"].tolist(),
              "rotvec": action["phone.rot"].as_rotvec().tolist(),
              "raw_inputs": action["phone.raw_inputs"], "enabled": action["phone.enabled"]}
    joints = {f"{m}.pos": v for m, v in zip(motors, q)}
    transition = create_transition(observation=joints, action=dict(action))
    for step in steps:
        transition = step(transition)
    record["goal"] = [transition[TransitionKey.ACTION][f"{m}.pos"] for m in motors]
    out.append(record)
print(json.dumps(out))
"""
)


def _rot_z_x(yaw: float, roll: float) -> np.ndarray:
    cz, sz, cx, sx = math.cos(yaw), math.sin(yaw), math.cos(roll), math.sin(roll)
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    return rz @ rx


def _inputs(n: int = 60) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    poses, messages, joints = [], [], []
    pos, yaw, roll = np.zeros(3), 0.0, 0.0
    q = np.array([10.0, -5.0, 20.0, 15.0, 0.0, 40.0])
    for i in range(n):
        pos = pos + rng.normal(0, 0.01, 3)
        yaw += rng.normal(0, 0.05)
        roll += rng.normal(0, 0.05)
        pose = np.eye(4)
        pose[:3, :3] = _rot_z_x(yaw, roll)
        pose[:3, 3] = pos
        poses.append(pose.tolist())
        move = i == 0 or not (20 <= i < 30)  # released for ten frames, then pressed again
        messages.append(
            {
                "move": move,
                "scale": 1.0,
                "reservedButtonA": bool(i % 7 == 0),
                "reservedButtonB": bool(i % 11 == 0),
            }
        )
        q = q + rng.normal(0, 0.5, 6)
        joints.append(q.tolist())
    return {"poses": poses, "messages": messages, "joints": joints, "motors": list(MOTORS)}


def test_phone_and_steps_match_lerobots(lerobot, tmp_path) -> None:
    data = _inputs()
    theirs = lerobot("-c", LEROBOT, json.dumps(data))
    namespace: dict[str, Any] = {}
    exec(STUB, namespace)
    kin = namespace["StubKinematics"]()
    now = [0.0]
    phone = AndroidPhone(clock=lambda: now[0])
    motors = list(MOTORS)
    steps: list[Any] = [
        MapPhoneActionToRobotAction(platform="android"),
        EEReferenceAndDelta(kin, {"x": 0.5, "y": 0.5, "z": 0.5}, motors),
        EEBoundsAndSafety({"min": [-0.3, -0.3, 0.0], "max": [0.3, 0.3, 0.4]}, max_ee_step_m=0.02),
        GripperVelocityToJoint(motors, speed_factor=20.0),
        InverseKinematicsEEToJoints(kin, motors),
    ]
    for i, (pose, msg, q) in enumerate(
        zip(data["poses"], data["messages"], data["joints"], strict=True)
    ):
        phone._on_pose(np.array(pose), msg)  # what the teleop package calls
        if i == 0:
            phone.calibrate(timeout_s=1)
        action = phone.read()
        expected = theirs[i]
        np.testing.assert_allclose(action["phone.pos"], expected["pos"], atol=1e-12)
        np.testing.assert_allclose(action["phone.rot"].as_rotvec(), expected["rotvec"], atol=1e-12)
        assert action["phone.raw_inputs"] == expected["raw_inputs"]
        assert action["phone.enabled"] == expected["enabled"]
        joints = {f"{m}.pos": v for m, v in zip(motors, q, strict=True)}
        out = dict(action)
        for step in steps:
            out = step.action(out, joints)
        np.testing.assert_allclose([out[f"{m}.pos"] for m in motors], expected["goal"], atol=1e-9)
