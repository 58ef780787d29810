"""Shared by the dataset-tool tests: small datasets, items read back, and v2.1 copies.

`make_v21` rewrites a v3.0 dataset in LeRobot's v2.1 layout (one parquet and one mp4 per
episode, JSON-lines metadata), as LeRobot 0.6.1's `convert_dataset_v21_to_v30` expects to find
it. Its mp4s are encoded again from decoded frames with plain PyAV, so the conversion under test
never reads a file the tools themselves wrote.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import stat
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader

STAT_NAMES = ("min", "max", "mean", "std", "count")


def load_writer_support():
    path = Path(__file__).with_name("writer_support.py")
    spec = importlib.util.spec_from_file_location("writer_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


writer = load_writer_support()


def copy_dataset(source: Path, root: Path) -> Path:
    shutil.copytree(source, root)
    for path in [root, *root.rglob("*")]:  # the shared fixtures are read-only
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return root


def items(root: Path) -> list[dict[str, Any]]:
    reader = LeRobotDatasetReader(root, video_backend="pyav")
    return reader.get_items(range(len(reader)))


REINDEXED = ("index", "episode_index", "task_index")


def assert_same_frame(got: dict[str, Any], expected: dict[str, Any], video_tolerance=0.0) -> None:
    """Equal in every key but the re-indexed ones; cameras within `video_tolerance` (0-255)."""
    assert set(got) == set(expected)
    for key, value in expected.items():
        if key in REINDEXED:
            continue
        other = got[key]
        if isinstance(value, torch.Tensor):
            if value.dtype == torch.float32 and value.ndim == 3 and video_tolerance:
                error = (other - value).abs().mean().item() * 255
                assert error <= video_tolerance, (key, error)
            else:
                assert torch.equal(other, value), key
        else:
            assert other == value, key


def info(root: Path) -> dict[str, Any]:
    return json.loads((root / "meta/info.json").read_text())


def _encode(frames: list[np.ndarray], path: Path, fps: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        stream.time_base = Fraction(1, fps)
        stream.options = {"crf": "10", "g": "4", "bf": "0"}
        for number, array in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(array, format="rgb24")
            frame.pts = number
            out.mux(stream.encode(frame))
        out.mux(stream.encode())


def _episode_frames(root: Path, row: dict[str, Any], key: str, fps: int) -> list[np.ndarray]:
    return writer.video_frames(root, row, key, fps)


def make_v21(v3: Path, out: Path) -> Path:
    """`v3` rewritten in LeRobot's v2.1 layout at `out`."""
    meta = info(v3)
    fps = meta["fps"]
    video_keys = [k for k, f in meta["features"].items() if f["dtype"] == "video"]
    episodes = writer.episodes_table(v3).to_pylist()
    data = writer.data_table(v3)
    (out / "meta").mkdir(parents=True)
    tasks = writer.tasks(v3)
    lines = {"episodes": [], "tasks": [], "stats": []}
    lines["tasks"] = [{"task_index": i, "task": t} for i, t in enumerate(tasks)]
    for row in episodes:
        index = row["episode_index"]
        lines["episodes"].append(
            {"episode_index": index, "tasks": row["tasks"], "length": row["length"]}
        )
        stats = {}
        for name, value in row.items():
            if name.startswith("stats/"):
                key, _, stat_name = name[len("stats/") :].rpartition("/")
                if stat_name in STAT_NAMES:
                    stats.setdefault(key, {})[stat_name] = value
        lines["stats"].append({"episode_index": index, "stats": stats})
        rows = data.filter(pc.equal(data.column("episode_index"), index))
        path = out / f"data/chunk-000/episode_{index:06d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, path)
        for key in video_keys:
            frames = _episode_frames(v3, row, key, fps)
            _encode(frames, out / f"videos/chunk-000/{key}/episode_{index:06d}.mp4", fps)
    for name, file in (("episodes", "episodes"), ("tasks", "tasks"), ("stats", "episodes_stats")):
        text = "".join(json.dumps(line) + "\n" for line in lines[name])
        (out / f"meta/{file}.jsonl").write_text(text)
    features = json.loads(json.dumps(meta["features"]))
    for key in video_keys:  # the files above are h264 now
        features[key].setdefault("info", {})["video.codec"] = "h264"
    legacy = {
        "codebase_version": "v2.1",
        "robot_type": meta.get("robot_type"),
        "total_episodes": meta["total_episodes"],
        "total_frames": meta["total_frames"],
        "total_tasks": meta["total_tasks"],
        "total_videos": len(video_keys) * meta["total_episodes"],
        "total_chunks": 1,
        "chunks_size": 1000,
        "fps": fps,
        "splits": {"train": f"0:{meta['total_episodes']}"},
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": (
            "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
            if video_keys
            else None
        ),
        "features": features,
    }
    (out / "meta/info.json").write_text(json.dumps(legacy, indent=4))
    return out
