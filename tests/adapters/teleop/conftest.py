"""A synthetic SO-101-like arm written as a URDF: a 5-joint chain (pan about z, lift, elbow and
wrist flex about y, roll about x) to `gripper_frame_link`, and a `gripper` jaw joint beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
MOTORS = (*ARM_JOINTS, "gripper")

_INERTIAL = (
    '<inertial><mass value="0.1"/><origin xyz="0 0 0"/>'
    '<inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>'
)


def _link(name: str) -> str:
    return f'<link name="{name}">{_INERTIAL}</link>'


def _joint(name: str, parent: str, child: str, xyz: str, axis: str, kind: str = "revolute") -> str:
    limit = (
        '<limit lower="-3.0" upper="3.0" effort="10" velocity="5"/>' if kind == "revolute" else ""
    )
    return (
        f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}" rpy="0 0 0"/><axis xyz="{axis}"/>{limit}</joint>'
    )


def synthetic_arm_urdf() -> str:
    links = [
        "base_link",
        "shoulder",
        "upper_arm",
        "lower_arm",
        "wrist",
        "gripper_link",
        "jaw",
        "gripper_frame_link",
    ]
    joints = [
        _joint("shoulder_pan", "base_link", "shoulder", "0 0 0.05", "0 0 1"),
        _joint("shoulder_lift", "shoulder", "upper_arm", "0 0 0.05", "0 1 0"),
        _joint("elbow_flex", "upper_arm", "lower_arm", "0.11 0 0", "0 1 0"),
        _joint("wrist_flex", "lower_arm", "wrist", "0.13 0 0", "0 1 0"),
        _joint("wrist_roll", "wrist", "gripper_link", "0.03 0 0", "1 0 0"),
        _joint("gripper", "gripper_link", "jaw", "0.02 0.01 0", "0 0 1"),
        _joint(
            "gripper_frame_joint",
            "gripper_link",
            "gripper_frame_link",
            "0.08 0 0",
            "0 0 1",
            "fixed",
        ),
    ]
    body = "".join(_link(name) for name in links) + "".join(joints)
    return f'<?xml version="1.0"?><robot name="synthetic_arm">{body}</robot>'


@pytest.fixture
def arm_urdf(tmp_path: Path) -> Path:
    path = tmp_path / "synthetic_arm.urdf"
    path.write_text(synthetic_arm_urdf())
    return path
