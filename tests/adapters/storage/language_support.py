"""A small dataset with language annotations, written by rlctl, for the loader and training tests.

Episode `e` has persistent rows that name it (so a batch shows whose rows it carries), and an
event of a different length on some frames: the lists are ragged across a batch, as in a real
annotated dataset. Load with `importlib` (tests run in importlib mode), as `writer_support`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer

FRONT = "observation.images.front"
LENGTHS = (6, 5, 7)
SAY = {"type": "function", "function": {"name": "say", "arguments": {"text": "on it"}}}


def features(*, camera: bool) -> dict[str, dict]:
    out = {
        "observation.state": {"dtype": "float32", "shape": [2], "names": None},
        "action": {"dtype": "float32", "shape": [2], "names": None},
        "language_persistent": {"dtype": "language", "shape": [1], "names": None},
        "language_events": {"dtype": "language", "shape": [1], "names": None},
    }
    if camera:
        out[FRONT] = {"dtype": "image", "shape": [32, 32, 3], "names": None}
    return out


def persistent(episode: int) -> list[dict]:
    rows = [{"role": "assistant", "content": f"plan {episode}", "style": "plan", "timestamp": 0.0}]
    rows += [
        {"role": "assistant", "content": f"step {k}", "style": "subtask", "timestamp": k / 10}
        for k in range(episode + 1)
    ]
    return rows


def events(episode: int, t: int) -> list[dict]:
    if t % 3 == 1:
        return [
            {"role": "user", "content": f"where? {episode}/{t}", "style": "vqa", "camera": FRONT},
            {"role": "assistant", "content": "left", "style": "vqa", "camera": FRONT},
        ]
    if t % 3 == 2:
        return [{"role": "assistant", "content": None, "style": None, "tool_calls": [SAY]}]
    return []


def write_annotated(root: Path, *, camera: bool = False) -> Path:
    """`LENGTHS` episodes at 10 fps; the state is the frame number, the action the episode's."""
    rng = np.random.default_rng(0)
    with LeRobotV3Writer().create(root, fps=10, features=features(camera=camera)) as session:
        for episode, length in enumerate(LENGTHS):
            for t in range(length):
                frame = {
                    "observation.state": np.full(2, t, np.float32),
                    "action": np.full(2, episode, np.float32),
                    "language_persistent": persistent(episode),
                    "language_events": events(episode, t),
                    "task": f"task {episode}",
                }
                if camera:
                    frame[FRONT] = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                session.add_frame(frame)
            session.save_episode()
    return root
