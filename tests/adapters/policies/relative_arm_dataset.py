"""Writes a small LeRobot v3.0 dataset for relative actions: a 4-joint arm with a gripper whose
episodes are longer than GR00T N1.7's 40-step chunk (its relative statistics are taken per step
of that chunk), for tests on both sides.

    write_arm_dataset(root) -> root

Features: `observation.state` (5: the 4 joints and a load reading), `action` (4, named
`shoulder.pos`, `elbow.pos`, `wrist.pos`, `gripper.pos`), camera `observation.images.front`
(32x32 images in the parquet files), two episodes of 48 and 44 frames at 10 fps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.features import FeatureSpec

ACTION_NAMES = ["shoulder.pos", "elbow.pos", "wrist.pos", "gripper.pos"]
STATE_NAMES = [*ACTION_NAMES, "load"]
LENGTHS = (48, 44)
TASKS = ("pick up the cube and place it in the box", "close the drawer")


def write_arm_dataset(root: Path) -> Path:
    features = {
        "observation.state": FeatureSpec("observation.state", "float32", (5,), names=STATE_NAMES),
        "action": FeatureSpec("action", "float32", (4,), names=ACTION_NAMES),
        "observation.images.front": FeatureSpec(
            "observation.images.front", "image", (32, 32, 3), names=["height", "width", "channels"]
        ),
    }
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    rng = np.random.default_rng(0)
    with LeRobotV3Writer(options=options).create(root, fps=10, features=features) as session:
        for length, task in zip(LENGTHS, TASKS, strict=True):
            joints = np.cumsum(rng.normal(scale=0.05, size=(length + 1, 4)), axis=0)
            for t in range(length):
                state = np.append(joints[t], rng.uniform()).astype(np.float32)
                action = joints[t + 1] + rng.normal(scale=0.01, size=4)
                action[3] = float(t % 10 > 4)  # the gripper opens and closes
                session.add_frame(
                    {
                        "observation.state": state,
                        "action": action.astype(np.float32),
                        "observation.images.front": rng.integers(0, 255, (32, 32, 3), np.uint8),
                        "task": task,
                    }
                )
            session.save_episode()
    return root
