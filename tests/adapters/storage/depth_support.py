"""Shared by the depth tests: a small dataset with depth cameras, its frames, and writing it.

Loaded by the test files with `load_support()` (pytest's importlib mode puts no test folder on
`sys.path`). Depth maps are smooth ramps plus noise, with some pixels at 0 (no reading) and some
past the quantizer's 10 m, so clamping is exercised too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.features import FeatureSpec

# x265 needs sides that are multiples of 8.
HEIGHT, WIDTH = 16, 32
HWC = ["height", "width", "channels"]
STATE = "observation.state"
DEPTH_VIDEO = "observation.images.depth"
DEPTH_IMAGE = "observation.images.depth_still"
RGB = "observation.images.front"
# Even lengths: after an odd-length episode LeRobot 0.6.1 cannot decode the next episode's first
# frames of its own depth videos (see rlctl.adapters.video.pyav_depth); rlctl can (ODD_EPISODES).
EPISODES = (("pick",) * 4, ("place",) * 6, ("pick",) * 4)
ODD_EPISODES = (("pick",) * 4, ("place",) * 3, ("pick",) * 5)
FPS = 10


def features(rgb: bool = True) -> dict[str, FeatureSpec]:
    depth = {"is_depth_map": True}
    out = {
        STATE: FeatureSpec(STATE, "float32", (2,)),
        DEPTH_VIDEO: FeatureSpec(DEPTH_VIDEO, "video", (HEIGHT, WIDTH, 1), HWC, info=depth),
        DEPTH_IMAGE: FeatureSpec(DEPTH_IMAGE, "image", (HEIGHT, WIDTH, 1), HWC, info=depth),
    }
    if rgb:
        out[RGB] = FeatureSpec(RGB, "video", (HEIGHT, WIDTH, 3), HWC)
    return out


def depth_mm(ep: int, t: int) -> np.ndarray:
    """A depth map in millimetres (float64), (H, W)."""
    rng = np.random.default_rng([ep, t])
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    depth = 300.0 + 150.0 * xx + 40.0 * yy + 80.0 * t + 500.0 * ep + rng.uniform(0, 30, xx.shape)
    depth[0, :3] = 0.0  # no reading
    depth[-1, -3:] = 12_000.0  # past depth_max
    return depth


def frame(ep: int, t: int, unit: str, rgb: bool = True, episodes=EPISODES) -> dict[str, Any]:
    """The frame recorded at (episode, t): depth as uint16 mm or float32 m (`unit`)."""
    mm = depth_mm(ep, t)
    depth = np.rint(mm).astype(np.uint16) if unit == "mm" else (mm / 1000.0).astype(np.float32)
    out: dict[str, Any] = {
        STATE: np.array([ep, t], dtype=np.float32),
        DEPTH_VIDEO: depth[..., None],
        DEPTH_IMAGE: depth[..., None],
        "task": episodes[ep][t],
    }
    if rgb:
        yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
        out[RGB] = np.stack(
            [(xx * 6 + 25 * t) % 256, (yy * 6 + 40 * ep) % 256, (xx + yy) % 256], axis=-1
        ).astype(np.uint8)
    return out


def frames(unit: str, rgb: bool = True, episodes=EPISODES) -> list[list[dict[str, Any]]]:
    return [
        [frame(ep, t, unit, rgb, episodes) for t in range(len(tasks))]
        for ep, tasks in enumerate(episodes)
    ]


def write(
    root: Path, unit: str, *, rgb: bool = True, subprocess: bool = False, episodes=EPISODES
) -> None:
    options = WriterOptions(encode_in_subprocess=subprocess, durable=False)
    with LeRobotV3Writer(options=options).create(root, fps=FPS, features=features(rgb)) as session:
        for episode in frames(unit, rgb, episodes):
            for values in episode:
                session.add_frame(values)
            session.save_episode()
