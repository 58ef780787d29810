"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

Writes datasets with LeRobot 0.6.1 and reads datasets back through it, so a test can compare
LeRobot's files and items with rlctl's. One call runs a list of jobs (one interpreter start):

    python lerobot_datasets.py JOBS.json

Each job is a mapping; the results, one per job, are printed as one JSON line.

- `{"do": "write", "root", "fps", "features", "episodes", "frames"}`: `LeRobotDataset.create` with
  `features` (info.json's form), then for episode `e` and frame `t` the values `frames` (an .npz)
  holds under `e/t/<key>`, with the task `episodes[e][t]`. Result: null.
- `{"do": "dump", "root", "out", "deltas", "stats_keys", "computed_keys", "video_backend"}`:
  every item of `LeRobotDataset(root, delta_timestamps=deltas)` into the .npz `out` (`i/<key>`),
  and the summary: length, episodes, tasks, `meta.stats` for `stats_keys`, and for
  `computed_keys` (default: `stats_keys`; numeric features) the statistics LeRobot's
  `compute_episode_stats` + `aggregate_stats` give from the stored rows.
"""

import json
import sys
from pathlib import Path

import numpy as np
from lerobot.datasets.compute_stats import aggregate_stats, compute_episode_stats
from lerobot.datasets.lerobot_dataset import LeRobotDataset


def write(job: dict) -> None:
    features = {
        key: {**spec, "shape": tuple(spec["shape"])} for key, spec in job["features"].items()
    }
    dataset = LeRobotDataset.create(
        "rlctl/interop", fps=job["fps"], features=features, root=job["root"], use_videos=True
    )
    with np.load(job["frames"]) as frames:
        for ep, tasks in enumerate(job["episodes"]):
            for t, task in enumerate(tasks):
                frame = {key: frames[f"{ep}/{t}/{key}"] for key in features}
                dataset.add_frame({**frame, "task": task})
            dataset.save_episode()
    dataset.finalize()


def computed_stats(dataset: LeRobotDataset, keys: list[str]) -> dict:
    table = dataset.hf_dataset.data.table
    episode_index = np.asarray(table.column("episode_index").to_pylist())
    features = {key: dataset.meta.features[key] for key in keys}
    per_episode = []
    for ep in np.unique(episode_index):
        rows = np.flatnonzero(episode_index == ep)
        data = {
            key: np.asarray(table.column(key).take(rows).to_pylist(), dtype=features[key]["dtype"])
            for key in keys
        }
        per_episode.append(compute_episode_stats(data, features))
    return as_lists(aggregate_stats(per_episode))


def as_lists(stats: dict) -> dict:
    return {k: {s: np.asarray(v).tolist() for s, v in entry.items()} for k, entry in stats.items()}


def dump(job: dict) -> dict:
    dataset = LeRobotDataset(
        "rlctl/interop",
        root=job["root"],
        delta_timestamps=job.get("deltas"),
        video_backend=job.get("video_backend", "pyav"),
    )
    arrays, tasks = {}, []
    for i in range(len(dataset)):
        item = dataset[i]
        tasks.append(item["task"])
        for key, value in item.items():
            if not isinstance(value, str):
                arrays[f"{i}/{key}"] = value.numpy()
    np.savez(job["out"], **arrays)
    keys = job.get("stats_keys", [])
    computed = job.get("computed_keys", keys)
    return {
        "len": len(dataset),
        "episodes": dataset.meta.total_episodes,
        "tasks": tasks,
        "stats": as_lists({key: dataset.meta.stats[key] for key in keys}),
        "computed": computed_stats(dataset, computed) if computed else {},
    }


def main(jobs_path: str) -> None:
    jobs = json.loads(Path(jobs_path).read_text())
    results = [write(job) if job["do"] == "write" else dump(job) for job in jobs]
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
