"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

    python lerobot_language.py write ROOT STAGING   # a dataset annotated by LeRobot's own tool
    python lerobot_language.py read ROOT            # the language columns of every item

`write` records 3 episodes with `LeRobotDataset.create`, stages plan, subtask, memory, motion,
task_aug, interjection, vqa, trace rows and a spoken `say` call, and writes them with the
steerable annotation pipeline's `LanguageColumnsWriter` (and its info.json update), exactly as
`lerobot-annotate` does after its VLM calls. Both print one JSON line.
"""

import json
import sys
from pathlib import Path

import numpy as np
from lerobot.annotations.steerable_pipeline.executor import Executor
from lerobot.annotations.steerable_pipeline.reader import iter_episodes
from lerobot.annotations.steerable_pipeline.staging import EpisodeStaging
from lerobot.annotations.steerable_pipeline.writer import LanguageColumnsWriter, speech_atom
from lerobot.datasets.lerobot_dataset import LeRobotDataset

FRONT = "observation.images.front"


def write(root: Path, staging: Path) -> None:
    features = {
        "observation.state": {"dtype": "float32", "shape": (2,), "names": None},
        "action": {"dtype": "float32", "shape": (2,), "names": None},
    }
    dataset = LeRobotDataset.create("rlctl/lang", fps=10, features=features, root=root)
    for episode, length in enumerate((6, 4, 5)):
        for t in range(length):
            dataset.add_frame(
                {
                    "observation.state": np.full(2, t, np.float32),
                    "action": np.full(2, episode, np.float32),
                    "task": f"task {episode}",
                }
            )
        dataset.save_episode()
    dataset.finalize()
    records = list(iter_episodes(root))
    for record in records:
        ts = record.frame_timestamps
        staged = EpisodeStaging(staging, record.episode_index)
        staged.write(
            "plan",
            [
                {
                    "role": "assistant",
                    "content": "1. reach 2. grasp",
                    "style": "plan",
                    "timestamp": ts[0],
                },
                {"role": "assistant", "content": "reach", "style": "subtask", "timestamp": ts[0]},
                {"role": "assistant", "content": "grasp", "style": "subtask", "timestamp": ts[2]},
                {"role": "assistant", "content": "reached", "style": "memory", "timestamp": ts[2]},
                {
                    "role": "assistant",
                    "content": "move left",
                    "style": "motion",
                    "timestamp": ts[1],
                },
                {
                    "role": "user",
                    "content": f"do task {record.episode_index}",
                    "style": "task_aug",
                    "timestamp": ts[0],
                },
            ],
        )
        staged.write(
            "interjections",
            [
                {"role": "user", "content": "stop!", "style": "interjection", "timestamp": ts[1]},
                speech_atom(ts[1], "stopping"),
            ],
        )
        staged.write(
            "vqa",
            [
                {
                    "role": "user",
                    "content": "where is it?",
                    "style": "vqa",
                    "timestamp": ts[3],
                    "camera": FRONT,
                },
                {
                    "role": "assistant",
                    "content": "left",
                    "style": "vqa",
                    "timestamp": ts[3],
                    "camera": FRONT,
                },
                {
                    "role": "assistant",
                    "content": "[[1,2],[3,4]]",
                    "style": "trace",
                    "timestamp": ts[3],
                    "camera": FRONT,
                },
            ],
        )
    LanguageColumnsWriter().write_all(records, staging, root)
    Executor._ensure_annotation_metadata_in_info(root)
    print(json.dumps({"written": str(root)}))


def read(root: Path) -> None:
    dataset = LeRobotDataset("rlctl/lang", root=root)
    items = []
    for i in range(len(dataset)):
        item = dataset[i]
        items.append(
            {
                "episode_index": int(item["episode_index"]),
                "language_persistent": item["language_persistent"],
                "language_events": item["language_events"],
            }
        )
    print(json.dumps({"items": items}))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        read(Path(sys.argv[2]))
