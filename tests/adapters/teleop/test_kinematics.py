"""RobotKinematics (numpy) and LeRobot's end-effector steps, on a synthetic 5-joint arm URDF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from rlctl.adapters.kinematics.ee_steps import (
    EE_FEATURE_KEYS,
    EEBoundsAndSafety,
    EEReferenceAndDelta,
    ForwardKinematicsJointsToEE,
    ForwardKinematicsJointsToEEAction,
    ForwardKinematicsJointsToEEObservation,
    GripperVelocityToJoint,
    InverseKinematicsEEToJoints,
    MapDeltaActionToRobotActionStep,
)
from rlctl.adapters.kinematics.robot_kinematics import RobotKinematics
from rlctl.adapters.teleop.config import GamepadTeleopConfig
from rlctl.adapters.teleop.ee_arm import ee_to_joints_steps
from rlctl.domain.errors import ConfigError, InvalidInput

from .conftest import MOTORS


def _kin(urdf: Path) -> RobotKinematics:
    return RobotKinematics(urdf, target_frame_name="gripper_frame_link", joint_names=list(MOTORS))


def test_forward_kinematics_follows_the_chain(arm_urdf: Path) -> None:
    kin = _kin(arm_urdf)
    stretched = kin.forward_kinematics(np.zeros(6))
    np.testing.assert_allclose(stretched[:3, 3], [0.35, 0.0, 0.10], atol=1e-9)
    np.testing.assert_allclose(stretched[:3, :3], np.eye(3), atol=1e-9)
    panned = kin.forward_kinematics(np.array([90.0, 0, 0, 0, 0, 0]))
    np.testing.assert_allclose(panned[:3, 3], [0.0, 0.35, 0.10], atol=1e-9)
    lifted = kin.forward_kinematics(np.array([0.0, -90, 0, 0, 0, 0]))  # about +y: x goes up
    np.testing.assert_allclose(lifted[:3, 3], [0.0, 0.0, 0.45], atol=1e-9)
    # The gripper jaw is not on the chain to the frame.
    np.testing.assert_allclose(kin.forward_kinematics(np.array([0.0, 0, 0, 0, 0, 40])), stretched)


def test_inverse_kinematics_recovers_the_joints_of_forward_poses(arm_urdf: Path) -> None:
    kin = _kin(arm_urdf)
    rng = np.random.default_rng(0)
    for _ in range(5):
        truth = np.concatenate([rng.uniform(-60, 60, 5), [30.0]])
        truth[2] = rng.uniform(20, 80)  # the elbow bent one way: one solution near the start
        pose = kin.forward_kinematics(truth)
        start = truth + np.concatenate([rng.uniform(-8, 8, 5), [0.0]])
        solved = kin.inverse_kinematics(start, pose, orientation_weight=1.0, iterations=60)
        np.testing.assert_allclose(solved[:5], truth[:5], atol=0.05)
        assert solved[5] == pytest.approx(30.0)  # the jaw is off the chain: it stays
        np.testing.assert_allclose(kin.forward_kinematics(solved), pose, atol=1e-6)


def test_a_gripper_value_past_the_joints_passes_through(arm_urdf: Path) -> None:
    kin = RobotKinematics(arm_urdf, joint_names=list(MOTORS[:5]))
    q = np.array([10.0, -20, 30, 5, 0, 77.0])
    solved = kin.inverse_kinematics(q, kin.forward_kinematics(q), iterations=3)
    assert solved.shape == (6,) and solved[5] == 77.0
    np.testing.assert_allclose(solved[:5], q[:5], atol=1e-6)


def test_bad_settings_say_what_and_where(arm_urdf: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no URDF file") as missing:
        RobotKinematics(tmp_path / "nope.urdf")
    assert missing.value.where == "urdf_path"
    with pytest.raises(ConfigError, match="no frame 'tool0'") as frame:
        RobotKinematics(arm_urdf, target_frame_name="tool0")
    assert "gripper_frame_link" in str(frame.value.hint)
    with pytest.raises(ConfigError, match="no joint 'elbow'") as joint:
        RobotKinematics(arm_urdf, joint_names=["shoulder_pan", "elbow"])
    assert "elbow_flex" in str(joint.value.hint)
    broken = tmp_path / "broken.urdf"
    broken.write_text("<robot name='x'><link name='a'/><joint name='j' type='revolute'>")
    with pytest.raises(ConfigError, match="cannot load the URDF"):
        RobotKinematics(broken)
    kin = _kin(arm_urdf)
    with pytest.raises(InvalidInput, match="not finite"):
        kin.forward_kinematics(np.array([0.0, np.nan, 0, 0, 0, 0]))
    with pytest.raises(InvalidInput, match="3 values for 6 joints"):
        kin.forward_kinematics(np.zeros(3))
    with pytest.raises(InvalidInput, match="4x4"):
        kin.inverse_kinematics(np.zeros(6), np.full((4, 4), np.inf))


def _joints(q: np.ndarray) -> dict[str, float]:
    return {f"{name}.pos": float(v) for name, v in zip(MOTORS, q, strict=True)}


def test_lerobots_steps_turn_a_relative_target_into_joint_goals(arm_urdf: Path) -> None:
    kin = _kin(arm_urdf)
    steps: list[Any] = [
        EEReferenceAndDelta(kin, {"x": 0.5, "y": 0.5, "z": 0.5}, MOTORS),
        EEBoundsAndSafety({"min": [-1.0, -1.0, -1.0], "max": [1.0, 1.0, 1.0]}, max_ee_step_m=0.10),
        GripperVelocityToJoint(MOTORS, speed_factor=20.0),
        InverseKinematicsEEToJoints(kin, MOTORS, orientation_weight=0.0),
    ]
    q = np.array([0.0, -40, 70, -30, 0, 10])
    start = kin.forward_kinematics(q)[:3, 3]

    def tick(action: dict[str, float]) -> dict[str, float]:
        out: dict[str, float] = dict(action)
        for step in steps:
            out = step.action(out, _joints(q))
        return out

    rest = {"enabled": 0.0, **dict.fromkeys(("target_x", "target_y", "target_z"), 0.0)}
    rest |= {"target_wx": 0.0, "target_wy": 0.0, "target_wz": 0.0, "gripper_vel": 0.0}
    held = tick(rest)
    assert sorted(held) == sorted(f"{m}.pos" for m in MOTORS)
    # Disabled at first: the command is where the arm is.
    np.testing.assert_allclose([held[f"{m}.pos"] for m in MOTORS[:5]], q[:5], atol=0.5)
    # Enabled: 4 cm up (target_z 0.08 at step size 0.5) and the gripper opening (vel 1 * 20).
    move = rest | {"enabled": 1.0, "target_z": 0.08, "gripper_vel": 1.0}
    for _ in range(40):  # the arm follows its goals; the latched reference stays put
        goal = tick(move)
        q = np.array([goal[f"{m}.pos"] for m in MOTORS])
    np.testing.assert_allclose(
        kin.forward_kinematics(q)[:3, 3], start + np.array([0, 0, 0.04]), atol=2e-3
    )
    assert q[5] == 100.0  # 10 + 20 a tick, clipped to 100


def test_the_safety_step_clips_to_the_workspace_and_limits_each_step() -> None:
    safety = EEBoundsAndSafety(
        {"min": [0.0, -0.2, 0.0], "max": [0.4, 0.2, 0.3]}, max_ee_step_m=0.05
    )
    pose = {"ee.x": 0.3, "ee.y": 0.0, "ee.z": 0.1, "ee.wx": 0.0, "ee.wy": 0.0, "ee.wz": 0.0}
    assert safety.action(dict(pose), {})["ee.x"] == 0.3
    far = safety.action(pose | {"ee.x": 9.0}, {})  # clipped to 0.4, then 0.05 from 0.3
    assert far["ee.x"] == pytest.approx(0.35)
    with pytest.raises(InvalidInput, match=r"ee\.z"):
        safety.action({k: v for k, v in pose.items() if k != "ee.z"}, {})
    with pytest.raises(InvalidInput, match="not finite"):
        safety.action(pose | {"ee.y": float("nan")}, {})
    strict = EEBoundsAndSafety({"min": [-1.0] * 3, "max": [1.0] * 3}, raise_on_jump=True)
    strict.action(dict(pose), {})
    with pytest.raises(InvalidInput, match="jumps"):
        strict.action(pose | {"ee.x": 0.9}, {})


def test_a_missing_joint_is_named(arm_urdf: Path) -> None:
    step = GripperVelocityToJoint(MOTORS)
    with pytest.raises(InvalidInput, match=r"gripper\.pos"):
        step.action({"ee.gripper_vel": 1.0}, {f"{m}.pos": 0.0 for m in MOTORS[:5]})


def test_urdf_origins_turned_by_roll_pitch_yaw_and_prismatic_joints(tmp_path: Path) -> None:
    from scipy.spatial.transform import Rotation

    urdf = tmp_path / "turned.urdf"
    urdf.write_text(
        '<robot name="t"><link name="base"/><link name="a"/><link name="b"/><link name="tip"/>'
        '<joint name="j1" type="revolute"><parent link="base"/><child link="a"/>'
        '<origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.5"/><axis xyz="0 1 1"/>'
        '<limit lower="-2" upper="2"/></joint>'
        '<joint name="slide" type="prismatic"><parent link="a"/><child link="b"/>'
        '<origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="1 0 0"/>'
        '<limit lower="0" upper="0.2"/></joint>'
        '<joint name="fixed" type="fixed"><parent link="b"/><child link="tip"/>'
        '<origin xyz="0.05 0 0" rpy="1.0 0 0"/></joint></robot>'
    )
    kin = RobotKinematics(urdf, target_frame_name="tip")
    assert kin.joint_names == ["j1", "slide"]

    def transform(xyz: list[float], rot: Rotation) -> np.ndarray:
        t = np.eye(4)
        t[:3, :3] = rot.as_matrix()
        t[:3, 3] = xyz
        return t

    axis = np.array([0, 1, 1]) / np.sqrt(2)
    expected = (
        transform([0.1, 0.2, 0.3], Rotation.from_euler("xyz", [0.3, -0.2, 0.5]))
        @ transform([0, 0, 0], Rotation.from_rotvec(axis * np.deg2rad(40)))
        @ transform([0, 0, 0.1], Rotation.identity())
        @ transform([0.07, 0, 0], Rotation.identity())  # the slide at 0.07 m
        @ transform([0.05, 0, 0], Rotation.from_euler("xyz", [1.0, 0, 0]))
    )
    np.testing.assert_allclose(kin.forward_kinematics(np.array([40.0, 0.07])), expected, atol=1e-12)
    # Inverse kinematics stays within the joints' limits (the slide's 0..0.2 m).
    far = expected.copy()
    far[:3, 3] += expected[:3, 0] * 0.5  # half a metre further along the slide
    solved = kin.inverse_kinematics(np.array([40.0, 0.07]), far, iterations=20)
    assert 0.0 <= solved[1] <= 0.2


def test_forward_kinematics_steps_give_lerobots_ee_features(arm_urdf: Path) -> None:
    kin = _kin(arm_urdf)
    motors = list(MOTORS)
    q = np.array([30.0, -40.0, 50.0, 10.0, 20.0, 60.0])
    joints = {f"{m}.pos": float(v) for m, v in zip(motors, q, strict=True)}
    pose = kin.forward_kinematics(q)
    rotvec = Rotation.from_matrix(pose[:3, :3]).as_rotvec()
    expected = [*pose[:3, 3], *rotvec, 60.0]

    observation = ForwardKinematicsJointsToEEObservation(kin, motors).observation(
        {**joints, "shoulder_pan.vel": 1.5}
    )
    assert list(observation) == ["shoulder_pan.vel", *EE_FEATURE_KEYS]
    np.testing.assert_allclose([observation[k] for k in EE_FEATURE_KEYS], expected, atol=1e-12)
    action = ForwardKinematicsJointsToEEAction(kin, motors).action(dict(joints), {})
    assert list(action) == list(EE_FEATURE_KEYS)
    on_action, on_observation = ForwardKinematicsJointsToEE(kin, motors)(joints, None)
    assert on_observation is None and on_action == action
    assert joints["gripper.pos"] == 60.0  # the input is left as it was
    names = ForwardKinematicsJointsToEE(kin, motors).feature_names([*joints, "shoulder_pan.vel"])
    assert names == ["shoulder_pan.vel", *EE_FEATURE_KEYS]

    # The pose reached by inverse kinematics is the pose asked for.
    target = kin.forward_kinematics(q + np.array([5.0, -5.0, 5.0, 0.0, 0.0, 0.0]))
    solved = kin.inverse_kinematics(q, target, orientation_weight=1.0, iterations=50)
    back = ForwardKinematicsJointsToEEAction(kin, motors).action(
        {f"{m}.pos": float(v) for m, v in zip(motors, solved, strict=True)}, {}
    )
    np.testing.assert_allclose([back["ee.x"], back["ee.y"], back["ee.z"]], target[:3, 3], atol=1e-6)

    step = ForwardKinematicsJointsToEEObservation(kin, motors)
    with pytest.raises(InvalidInput, match=r"elbow_flex\.pos"):
        step.observation({k: v for k, v in joints.items() if k != "elbow_flex.pos"})
    with pytest.raises(InvalidInput, match="not finite"):
        step.observation({**joints, "wrist_flex.pos": float("nan")})
    with pytest.raises(InvalidInput, match=r"gripper\.pos"):
        ForwardKinematicsJointsToEEObservation(kin, motors[:5]).observation(
            {k: v for k, v in joints.items() if k != "gripper.pos"}
        )


def test_the_delta_chain_moves_the_target_from_the_last_solution(arm_urdf: Path) -> None:
    """Held deltas move the target a step a tick from the last inverse kinematics solution,
    even while the arm has not moved (LeRobot's `use_ik_solution`); released, it holds."""
    kin = _kin(arm_urdf)
    config = GamepadTeleopConfig(end_effector_step_sizes=(0.01, 0.01, 0.01))
    pipeline = ee_to_joints_steps(config, kin)
    q = np.array([0.0, -30.0, 60.0, -30.0, 0.0, 50.0])
    joints = {f"{m}.pos": float(v) for m, v in zip(MOTORS, q, strict=True)}
    z0 = kin.forward_kinematics(q)[2, 3]
    heights = []
    for _ in range(4):
        out = pipeline({"delta_x": 0.0, "delta_y": 0.0, "delta_z": 1.0, "gripper": 0.0}, joints)
        goal = np.array([out[f"{m}.pos"] for m in MOTORS])
        heights.append(kin.forward_kinematics(goal)[2, 3])
        assert goal[5] == 100.0  # close (0): LeRobot's max_gripper_pos
    assert heights[-1] > z0 + 0.03  # four ticks of 1 cm from the arm that did not move
    assert np.all(np.diff(heights) > 0.005)
    still = pipeline({"delta_x": 0.0, "delta_y": 0.0, "delta_z": 0.0, "gripper": 1.0}, joints)
    held = np.array([still[f"{m}.pos"] for m in MOTORS])
    assert kin.forward_kinematics(held)[2, 3] == pytest.approx(heights[-1], abs=5e-3)
    assert held[5] == 50.0  # stay
    step = MapDeltaActionToRobotActionStep()
    assert not step.action({"delta_x": 0.0005, "delta_y": 0, "delta_z": 0, "gripper": 1}, {})[
        "enabled"
    ]
    with pytest.raises(InvalidInput, match="delta_z"):
        step.action({"delta_x": 0.0, "delta_y": 0.0, "gripper": 1.0}, {})
