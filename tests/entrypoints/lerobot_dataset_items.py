"""Run inside LeRobot's Python by the `lerobot_*.py` scripts beside it, never by rlctl's tests:
a dataset as LeRobot 0.6.1's `LeRobotDataset` reads it, every item's arrays into an .npz
(`i/<key>`) and what the tests compare in JSON."""

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset


def read_dataset(repo_id: str, root: str, out: str) -> dict:
    """Every item of the dataset at `root` into `out`; its length, episodes, robot type,
    feature names and each item's task."""
    dataset = LeRobotDataset(repo_id, root=root, video_backend="pyav")
    arrays, tasks = {}, []
    for i in range(len(dataset)):
        item = dataset[i]
        tasks.append(item["task"])
        for key, value in item.items():
            if not isinstance(value, str):
                arrays[f"{i}/{key}"] = value.numpy()
    np.savez(out, **arrays)
    return {
        "len": len(dataset),
        "episodes": dataset.meta.total_episodes,
        "robot_type": dataset.meta.robot_type,
        "names": {k: v.get("names") for k, v in dataset.meta.features.items()},
        "tasks": tasks,
    }
