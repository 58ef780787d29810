"""What the writer's background threads must not do while a recording runs."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, sys, threading
import numpy as np
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.video import VideoEncoding

imported = []
def on_import(event, args):
    if event == "import" and threading.current_thread().name == "rlctl-commit":
        imported.append(args[0])
sys.addaudithook(on_import)

camera = {"dtype": "video", "shape": [64, 64, 3], "names": ["height", "width", "channels"]}
features = {
    "observation.state": {"dtype": "float32", "shape": [2], "names": None},
    "observation.images.front": camera,
}
session = LeRobotV3Writer(options=WriterOptions(durable=False)).create(
    sys.argv[1], fps=10, features=features, video=VideoEncoding(codec="h264"))
for _ in range(2):
    for k in range(5):
        image = np.full((64, 64, 3), 20 * k, np.uint8)
        session.add_frame(
            {"observation.state": np.full(2, k, np.float32),
             "observation.images.front": image, "task": "t"})
    session.save_episode()
session.finalize()
print(json.dumps(sorted(set(imported))))
"""


def test_committing_an_episode_imports_nothing(tmp_path):
    # An import holds the interpreter lock (numpy.ma's took 0.2 s): on the committer thread it
    # would stall the control loop at the start of the next episode.
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "ds")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    imported = set(json.loads(result.stdout.strip().splitlines()[-1]))
    # PyAV loads its subtitle stream class when it first opens an input: well under 1 ms.
    assert imported <= {"av.subtitles", "av.subtitles.stream"}


def test_at_most_two_saved_episodes_wait_for_the_disk_then_saving_waits():
    """A disk slower than the recording: the third `submit` waits until the first episode is
    written (episodes piling up in memory would all be lost at a crash)."""
    import threading
    from pathlib import Path
    from types import SimpleNamespace

    from rlctl.adapters.storage.lerobot_v3.commit import EpisodeCommitter
    from rlctl.domain.dataset_meta import EpisodeRecord

    disk = threading.Event()
    written: list[int] = []

    class SlowFiles:
        root = Path("slow")

        def commit(self, job):
            disk.wait(30)
            written.append(job.episode_index)
            return EpisodeRecord(
                index=job.episode_index,
                length=1,
                tasks=("t",),
                dataset_from_index=job.episode_index,
                dataset_to_index=job.episode_index + 1,
            )

    committer = EpisodeCommitter(SlowFiles())  # type: ignore[arg-type]
    jobs = [SimpleNamespace(episode_index=i, discard=lambda: None) for i in range(3)]
    committer.submit(jobs[0])
    committer.submit(jobs[1])
    third = threading.Thread(target=committer.submit, args=(jobs[2],))
    third.start()
    third.join(0.5)
    assert third.is_alive()  # waiting for the disk
    disk.set()
    third.join(30)
    assert not third.is_alive()
    committer.wait()
    committer.close()
    assert written == [0, 1, 2]
