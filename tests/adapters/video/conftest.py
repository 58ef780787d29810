"""Shared pieces of the video adapter tests: LeRobot's sim_video fixture and synthetic frames."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

FRONT = "observation.images.front"


@pytest.fixture(scope="session")
def sim_video(fixtures_dir: Path) -> Path:
    return fixtures_dir / "sim_video"


@pytest.fixture(scope="session")
def front_mp4(sim_video: Path) -> Path:
    return sim_video / "videos" / FRONT / "chunk-000" / "file-000.mp4"


def smooth_frames(count: int, height: int = 48, width: int = 64, phase: float = 0.0) -> np.ndarray:
    """Slowly moving colour waves: content a lossy codec keeps close to the original."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    frames = []
    for i in range(count):
        t = phase + 0.3 * i
        frames.append(
            np.stack(
                [
                    128 + 90 * np.sin(x / 9 + t),
                    128 + 90 * np.cos(y / 7 - t),
                    128 + 90 * np.sin((x + y) / 13 + 0.5 * t),
                ],
                axis=-1,
            )
        )
    return np.round(np.stack(frames)).astype(np.uint8)


@pytest.fixture(scope="session")
def make_frames() -> Callable[..., np.ndarray]:
    return smooth_frames
