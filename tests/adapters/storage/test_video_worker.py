"""The encoder worker process: an episode in, an mp4 out, below the recording's CPU priority.

Linux only (it reads /proc), as the recording rigs are."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlctl.adapters.storage.lerobot_v3.video_worker import SubprocessEncoder
from rlctl.domain.video import VideoEncoding


def test_the_worker_encodes_an_episode_at_a_lower_priority(tmp_path):
    # AV1 (SVT-AV1) switches its threads to SCHED_FIFO wherever it may (as root): not here.
    encoder = SubprocessEncoder("observation.images.front", niceness=5)
    try:
        encoder.begin(tmp_path / "episode.mp4", 10, VideoEncoding())
        for k in range(3):
            encoder.add_frame(np.full((64, 64, 3), 40 * k, dtype=np.uint8))
        encoded = encoder.end().result(timeout=60)
        threads = [int(task.name) for task in Path(f"/proc/{encoder._process.pid}/task").iterdir()]
        policies = {os.sched_getscheduler(tid) for tid in threads}
        niceness = {os.getpriority(os.PRIO_PROCESS, tid) for tid in threads}
    finally:
        encoder.close()
    assert encoded.frame_count == 3 and encoded.path.is_file()
    assert policies == {os.SCHED_OTHER}
    assert niceness == {min(19, os.getpriority(os.PRIO_PROCESS, 0) + 5)}
