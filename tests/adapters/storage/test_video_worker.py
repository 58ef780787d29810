"""The encoder worker process: an episode in, an mp4 out, below the recording's CPU priority."""

from __future__ import annotations

import os

import numpy as np

from rlctl.adapters.storage.lerobot_v3.video_worker import SubprocessEncoder
from rlctl.domain.video import VideoEncoding


def test_the_worker_encodes_an_episode_at_a_lower_priority(tmp_path):
    encoder = SubprocessEncoder("observation.images.front", niceness=5)
    try:
        encoder.begin(tmp_path / "episode.mp4", 10, VideoEncoding(codec="h264"))
        for k in range(3):
            encoder.add_frame(np.full((64, 64, 3), 40 * k, dtype=np.uint8))
        encoded = encoder.end().result(timeout=60)
        niceness = os.getpriority(os.PRIO_PROCESS, encoder._process.pid)
    finally:
        encoder.close()
    assert encoded.frame_count == 3 and encoded.path.is_file()
    assert niceness == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 5)
