"""A virtual Unitree G1 exoskeleton arm: a pseudo-terminal printing the lines its board prints,
and small stand-in URDFs laid out as the Hub repo `lerobot/unitree-g1-mujoco` lays them out.

The board's firmware prints one line of 16 space-separated 12-bit readings per sample (115200
baud): each exoskeleton joint as a (sine, cosine) pair of hall sensors on its channels
(`JOINT_CHANNELS`), the joystick on channels 11 (x), 12 (button, high when released) and 13 (y).
Here a joint's pair traces an ellipse of known centre, axes and tilt as it turns, as a real
sensor's does, so a calibration can be fitted and checked:

    with VirtualExoArm("left") as arm:       # arm.port: open it like /dev/ttyACM0
        arm.set_angles(elbow_flex=0.4)       # what a person's arm does (radians)
        arm.sweep("shoulder_pitch")          # the joint turns round and round (calibration)
        arm.garble(3)                        # the next 3 lines come out as noise
        arm.pause()                          # the board stops sending (resume() restarts it)

`write_assets(folder)` writes a G1 URDF with the 14 arm joints (and a locked waist and hand
joint) and two five-joint exoskeleton arms: enough for the solver, not Unitree's geometry.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from rlctl.adapters.teleop.virtual_line_board import VirtualLineBoard
from rlctl.domain.exoskeleton import (
    ADC_HALF,
    ADC_MAX,
    CHANNELS,
    EXO_JOINTS,
    JOINT_CHANNELS,
    ExoCalibration,
    ExoJointCalibration,
)

JOYSTICK_X, JOYSTICK_BUTTON, JOYSTICK_Y = 11, 12, 13


class VirtualExoArm(VirtualLineBoard):
    device_name = "virtual G1 exoskeleton arm"
    thread_name = "exo board"
    garbled_fields = 7

    def __init__(self, side: str, *, period_s: float = 0.005, seed: int = 0) -> None:
        super().__init__(period_s=period_s)
        rng = np.random.default_rng(seed + (0 if side == "left" else 1))
        # Each joint's sensor ellipse: centre (counts around the ADC's middle), semi-axes, tilt.
        self.ellipses = {
            joint: (
                rng.uniform(-80, 80, size=2),
                (float(rng.uniform(1300, 1700)), float(rng.uniform(900, 1250))),
                float(rng.uniform(-0.6, 0.6)),
            )
            for joint in EXO_JOINTS
        }
        # The angle each joint's sensor reads in the joint's zero pose.
        self.zero_phase = {joint: float(rng.uniform(-math.pi, math.pi)) for joint in EXO_JOINTS}
        self.side = side
        self._angles = dict.fromkeys(EXO_JOINTS, 0.0)
        self._joystick = [2048, 4095, 2048]  # x, button (released: high), y
        self._sweeping: str | None = None
        self._sweep_phase = 0.0

    # What a person does

    def set_angles(self, **angles: float) -> None:
        """Joint angles in radians, as the calibrated exoskeleton reports them."""
        with self._lock:
            for joint, angle in angles.items():
                if joint not in self._angles:
                    raise KeyError(joint)
                self._angles[joint] = float(angle)

    def set_joystick(self, x: int, y: int, *, button: int = 4095) -> None:
        with self._lock:
            self._joystick = [int(x), int(button), int(y)]

    def sweep(self, joint: str | None) -> None:
        """`joint` turns round and round (one turn per 200 lines); None stops it."""
        with self._lock:
            self._sweeping = joint

    def raw(self) -> list[int]:
        with self._lock:
            return self._line_values()

    # The firmware

    def sensor_phase(self, joint: str, angle: float) -> float:
        """The angle on the sensor's circle for the joint at `angle` (calibration reads
        `-(phase - zero)`)."""
        return self.zero_phase[joint] - angle

    def _line_values(self) -> list[int]:
        values = [2048] * CHANNELS
        values[JOYSTICK_X], values[JOYSTICK_BUTTON], values[JOYSTICK_Y] = self._joystick
        for joint, (sine, cosine) in JOINT_CHANNELS.items():
            angle = self._angles[joint]
            if joint == self._sweeping:
                angle = self._sweep_phase
            centre, (a, b), tilt = self.ellipses[joint]
            phase = self.sensor_phase(joint, angle)
            unit = np.array([a * math.cos(phase), b * math.sin(phase)])
            rot = np.array([[math.cos(tilt), -math.sin(tilt)], [math.sin(tilt), math.cos(tilt)]])
            x, y = rot @ unit + centre
            values[cosine] = int(np.clip(round(x + ADC_HALF), 0, ADC_MAX))
            values[sine] = int(np.clip(round(y + ADC_HALF), 0, ADC_MAX))
        return values

    def _next_values(self) -> list[int]:
        if self._sweeping is not None:
            self._sweep_phase = (self._sweep_phase + 2 * math.pi / 200) % (2 * math.pi)
        return self._line_values()


def true_calibration(arm: VirtualExoArm) -> ExoCalibration:
    """The calibration a perfect fit of `arm`'s ellipses would give (LeRobot's file content)."""
    joints = []
    for joint in EXO_JOINTS:
        centre, (a, b), tilt = arm.ellipses[joint]
        rot = np.array([[math.cos(tilt), -math.sin(tilt)], [math.sin(tilt), math.cos(tilt)]])
        t = np.diag([1 / a, 1 / b]) @ rot.T
        joints.append(
            ExoJointCalibration(
                joint,
                (float(centre[0]), float(centre[1])),
                ((float(t[0, 0]), float(t[0, 1])), (float(t[1, 0]), float(t[1, 1]))),
                arm.sensor_phase(joint, 0.0),
            )
        )
    return ExoCalibration(side=arm.side, joints=tuple(joints))


# --- stand-in URDFs ---------------------------------------------------------------------------

_ARM_CHAIN = (  # (joint suffix, axis, origin xyz from the previous link, lower, upper)
    ("shoulder_pitch", "0 1 0", "0 {y} 0.25", -3.0892, 2.6704),
    ("shoulder_roll", "1 0 0", "0 0 0", None, None),
    ("shoulder_yaw", "0 0 1", "0 0 -0.08", -2.618, 2.618),
    ("elbow", "0 1 0", "0.02 0 -0.1", -1.0472, 2.0944),
    ("wrist_roll", "1 0 0", "0.1 0 0", -1.972222054, 1.972222054),
    ("wrist_pitch", "0 1 0", "0.04 0 0", -1.614429558, 1.614429558),
    ("wrist_yaw", "0 0 1", "0.02 0 0", -1.614429558, 1.614429558),
)
_SHOULDER_ROLL = {"left": (-1.5882, 2.2515), "right": (-2.2515, 1.5882)}


def _link(name: str, mass: float = 0.5) -> str:
    return (
        f'  <link name="{name}"><inertial><origin xyz="0.02 0 0"/><mass value="{mass}"/>'
        '<inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/>'
        "</inertial></link>\n"
    )


def _joint(name: str, kind: str, parent: str, child: str, xyz: str, axis: str, lim: str) -> str:
    limit = f'<limit lower="{lim.split()[0]}" upper="{lim.split()[1]}" effort="25" velocity="10"/>'
    return (
        f'  <joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}" rpy="0 0 0"/><axis xyz="{axis}"/>'
        + (limit if kind == "revolute" else "")
        + "</joint>\n"
    )


def g1_urdf() -> str:
    body = _link("pelvis", 5.0) + _link("torso_link", 5.0)
    body += _joint("waist_yaw_joint", "revolute", "pelvis", "torso_link", "0 0 0.1", "0 0 1",
                   "-2.618 2.618")  # fmt: skip
    for side, y in (("left", 0.15), ("right", -0.15)):
        parent = "torso_link"
        for suffix, axis, xyz, low, high in _ARM_CHAIN:
            if low is None:
                low, high = _SHOULDER_ROLL[side]
            link = f"{side}_{suffix}_link"
            body += _link(link)
            body += _joint(f"{side}_{suffix}_joint", "revolute", parent, link,
                           xyz.format(y=y), axis, f"{low} {high}")  # fmt: skip
            parent = link
        body += _link(f"{side}_hand_thumb_0_link", 0.05)
        body += _joint(f"{side}_hand_thumb_0_joint", "revolute", parent,
                       f"{side}_hand_thumb_0_link", "0.05 0 0", "0 1 0", "-1 1")  # fmt: skip
    return f'<?xml version="1.0"?>\n<robot name="g1_stand_in">\n{body}</robot>\n'


def exo_urdf(side: str) -> str:
    axes = {"shoulder_pitch": "0 1 0", "shoulder_yaw": "0 0 1", "shoulder_roll": "1 0 0",
            "elbow_flex": "0 1 0", "wrist_roll": "1 0 0"}  # fmt: skip
    origins = {"shoulder_pitch": "0 0 0", "shoulder_yaw": "0 0 -0.08",
               "shoulder_roll": "0 0 0", "elbow_flex": "0.02 0 -0.1",
               "wrist_roll": "0.1 0 0"}  # fmt: skip
    # Mounted so that, shifted by LeRobot's offsets, its hand lands where the stand-in G1's
    # hand is at rest.
    mount = f"-0.57 {-0.15 if side == 'left' else 0.15} 0.35"
    body = _link(f"exo_{side}") + _link("mount")
    body += _joint("mount_joint", "fixed", f"exo_{side}", "mount", mount, "1 0 0", "0 0")
    parent = "mount"
    for joint in EXO_JOINTS:
        link = f"{joint}_link"
        body += _link(link)
        body += _joint(joint, "revolute", parent, link, origins[joint], axes[joint], "-3.14 3.14")
        parent = link
    body += _link("ee", 0.01)
    body += _joint("ee_joint", "fixed", parent, "ee", "0.08 0 0", "1 0 0", "0 0")
    return f'<?xml version="1.0"?>\n<robot name="exo_{side}">\n{body}</robot>\n'


def write_assets(folder: str | os.PathLike[str]) -> Path:
    """Stand-in URDFs under `folder/assets/`, named as in `lerobot/unitree-g1-mujoco`."""
    assets = Path(folder) / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    (assets / "g1_body29_hand14.urdf").write_text(g1_urdf(), encoding="utf-8")
    for side in ("left", "right"):
        (assets / f"exo_{side}.urdf").write_text(exo_urdf(side), encoding="utf-8")
    return Path(folder)
