"""A small LeRobot v3.0 dataset written by rlctl's own writer, for the viewer's tests.

Each camera frame is one flat colour that encodes where it is: red = 10 + 20 * frame index,
green = 40 + 60 * episode index. A test that reads a pixel of the shown video frame therefore
knows which episode and frame the page is showing, through AV1's compression (flat colours
survive it within a few levels).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.adapters.viewer.hub_cache import hub_cache_copy

FPS = 10
FRAMES = (10, 12, 8)
CAMERAS = ("observation.images.front", "observation.images.wrist")
JOINTS = ["shoulder", "elbow", "wrist", "gripper"]


def frame_colour(episode: int, frame: int) -> tuple[int, int, int]:
    return 10 + 20 * frame, 40 + 60 * episode, 128


def write_viewer_dataset(
    root: Path, frames: tuple[int, ...] = FRAMES, hw: int = 32, dtype: str = "video"
) -> Path:
    """`dtype="image"` stores the cameras as PNG pictures in the data files instead."""
    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer

    features: dict = {
        "observation.state": {"dtype": "float32", "shape": [len(JOINTS)], "names": JOINTS},
        "action": {"dtype": "float32", "shape": [len(JOINTS)], "names": JOINTS},
    }
    for key in CAMERAS:
        features[key] = {
            "dtype": dtype,
            "shape": [hw, hw, 3],
            "names": ["height", "width", "channels"],
        }
    session = LeRobotV3Writer().create(root, fps=FPS, features=features, robot_type="so101")
    for episode, length in enumerate(frames):
        for frame in range(length):
            t = frame / FPS
            state = np.array([np.sin(t + j) for j in range(len(JOINTS))], np.float32)
            values = {"observation.state": state, "action": state + np.float32(0.1)}
            picture = np.empty((hw, hw, 3), np.uint8)
            picture[...] = frame_colour(episode, frame)
            for key in CAMERAS:
                values[key] = picture
            session.add_frame({**values, "task": f"task {episode % 2}"})
        session.save_episode()
    session.finalize()
    return root


@pytest.fixture(scope="session")
def viewer_dataset(tmp_path_factory) -> Path:
    return write_viewer_dataset(tmp_path_factory.mktemp("viewer") / "dataset")


@pytest.fixture(scope="session")
def image_dataset(tmp_path_factory) -> Path:
    """The same content with the cameras stored as pictures (no video)."""
    return write_viewer_dataset(tmp_path_factory.mktemp("viewer") / "images", dtype="image")


@pytest.fixture(scope="session")
def colour_of():
    """`colour_of(episode, frame)`: the flat colour `viewer_dataset` drew there."""
    return frame_colour


@pytest.fixture(scope="session")
def hub_snapshot(viewer_dataset, tmp_path_factory) -> Path:
    """`viewer_dataset` as a snapshot of the Hub's cache (files are links into `blobs/`)."""
    return hub_cache_copy(viewer_dataset, tmp_path_factory.mktemp("hub") / "cache")
