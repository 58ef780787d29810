"""LeRobot 0.6.1's `ForwardKinematicsJointsToEE*` steps and its end-effector teleoperator chain
(lerobot/rl/gym_manipulator.py: MapDeltaActionToRobotActionStep, EEReferenceAndDelta from the
IK solution, EEBoundsAndSafety, discrete GripperVelocityToJoint, InverseKinematicsRLStep)
against rlctl's, on the same joints and deltas (opt-in: RLCTL_LEROBOT_PYTHON).

LeRobot's `RobotKinematics` needs placo, which its venv does not have (and whose wheels pin a
numpy rlctl cannot take): both sides run the phone test's stub kinematics, so what is compared
is the steps' arithmetic and keys; rlctl's own URDF kinematics is tested on its own in
test_kinematics.py."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from rlctl.adapters.kinematics.ee_steps import (
    ForwardKinematicsJointsToEE,
    ForwardKinematicsJointsToEEAction,
    ForwardKinematicsJointsToEEObservation,
)
from rlctl.adapters.teleop.config import GamepadTeleopConfig
from rlctl.adapters.teleop.ee_arm import ee_to_joints_steps

from .conftest import MOTORS
from .test_phone_lerobot import STUB

pytestmark = pytest.mark.lerobot

LEROBOT = (
    STUB
    + """
import json, sys
from lerobot.processor import TransitionKey
from lerobot.processor.converters import create_transition
from lerobot.processor import MapDeltaActionToRobotActionStep
from lerobot.robots.so_follower.robot_kinematic_processor import (
    EEBoundsAndSafety, EEReferenceAndDelta, ForwardKinematicsJointsToEE,
    ForwardKinematicsJointsToEEAction, ForwardKinematicsJointsToEEObservation,
    GripperVelocityToJoint, InverseKinematicsRLStep)

data = json.loads(sys.argv[1])
motors = data["motors"]
kin = StubKinematics()
out = {"fk_obs": [], "fk_action": [], "fk_both": [], "goals": []}
obs_step = ForwardKinematicsJointsToEEObservation(kinematics=kin, motor_names=motors)
act_step = ForwardKinematicsJointsToEEAction(kinematics=kin, motor_names=motors)
both = ForwardKinematicsJointsToEE(kinematics=kin, motor_names=motors)
for q in data["joints"]:
    joints = {f"{m}.pos": v for m, v in zip(motors, q)}
    t = obs_step(create_transition(observation={**joints, "extra": 1.0}))
    out["fk_obs"].append(t[TransitionKey.OBSERVATION])
    t = act_step(create_transition(action=dict(joints), observation={}))
    out["fk_action"].append(t[TransitionKey.ACTION])
    t = both(create_transition(action=dict(joints), observation=dict(joints)))
    out["fk_both"].append([t[TransitionKey.ACTION], t[TransitionKey.OBSERVATION]])
steps = [
    MapDeltaActionToRobotActionStep(),
    EEReferenceAndDelta(kinematics=kin, end_effector_step_sizes=data["sizes"], motor_names=motors,
                        use_latched_reference=False, use_ik_solution=True),
    EEBoundsAndSafety(end_effector_bounds=data["bounds"], max_ee_step_m=0.05,
                      raise_on_jump=False),
    GripperVelocityToJoint(clip_max=100.0, speed_factor=1.0, discrete_gripper=True),
    InverseKinematicsRLStep(kinematics=kin, motor_names=motors,
                            initial_guess_current_joints=False),
]
complementary = {}
for delta, q in zip(data["deltas"], data["joints"]):
    joints = {f"{m}.pos": v for m, v in zip(motors, q)}
    action = dict(zip(["delta_x", "delta_y", "delta_z", "gripper"], delta))
    t = create_transition(observation=joints, action=action, complementary_data=complementary)
    for step in steps:
        t = step(t)
    complementary = dict(t[TransitionKey.COMPLEMENTARY_DATA])
    out["goals"].append([t[TransitionKey.ACTION][f"{m}.pos"] for m in motors])
print(json.dumps(out))
"""
)


def _inputs(n: int = 40) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    q = np.array([10.0, -5.0, 20.0, 15.0, 0.0, 40.0])
    joints, deltas = [], []
    for i in range(n):
        q = q + rng.normal(0, 0.5, 6)
        joints.append(q.tolist())
        held = not (15 <= i < 22)  # released for a while: the target is held
        delta = rng.choice([-1.0, 0.0, 1.0], 3) if held else np.zeros(3)
        deltas.append([*delta.tolist(), float(rng.integers(0, 3))])
    return {
        "joints": joints,
        "deltas": deltas,
        "motors": list(MOTORS),
        "sizes": {"x": 0.01, "y": 0.02, "z": 0.015},
        "bounds": {"min": [-0.3, -0.3, 0.0], "max": [0.3, 0.3, 0.4]},
    }


def test_forward_kinematics_steps_and_the_gamepad_chain_match_lerobots(lerobot) -> None:
    data = _inputs()
    theirs = lerobot("-c", LEROBOT, json.dumps(data))
    namespace: dict[str, Any] = {}
    exec(STUB, namespace)
    kin = namespace["StubKinematics"]()
    motors = list(MOTORS)
    on_obs = ForwardKinematicsJointsToEEObservation(kin, motors)
    on_action = ForwardKinematicsJointsToEEAction(kin, motors)
    both = ForwardKinematicsJointsToEE(kin, motors)
    for i, q in enumerate(data["joints"]):
        joints = {f"{m}.pos": v for m, v in zip(motors, q, strict=True)}
        ours = on_obs.observation({**joints, "extra": 1.0})
        assert list(ours) == list(theirs["fk_obs"][i])  # same keys, same order
        np.testing.assert_allclose(list(ours.values()), list(theirs["fk_obs"][i].values()))
        ours = on_action.action(dict(joints), {})
        assert list(ours) == list(theirs["fk_action"][i])
        np.testing.assert_allclose(list(ours.values()), list(theirs["fk_action"][i].values()))
        action, observation = both(joints, joints)
        assert action is not None and observation is not None
        np.testing.assert_allclose(list(action.values()), list(theirs["fk_both"][i][0].values()))
        np.testing.assert_allclose(
            list(observation.values()), list(theirs["fk_both"][i][1].values())
        )
    sizes = data["sizes"]
    config = GamepadTeleopConfig(
        end_effector_step_sizes=(sizes["x"], sizes["y"], sizes["z"]),
        end_effector_bounds_min=tuple(data["bounds"]["min"]),
        end_effector_bounds_max=tuple(data["bounds"]["max"]),
    )
    pipeline = ee_to_joints_steps(config, kin)
    for i, (delta, q) in enumerate(zip(data["deltas"], data["joints"], strict=True)):
        joints = {f"{m}.pos": v for m, v in zip(motors, q, strict=True)}
        action = dict(zip(["delta_x", "delta_y", "delta_z", "gripper"], delta, strict=True))
        out = pipeline(action, joints)
        np.testing.assert_allclose(
            [out[f"{m}.pos"] for m in motors], theirs["goals"][i], atol=1e-9, err_msg=f"tick {i}"
        )
