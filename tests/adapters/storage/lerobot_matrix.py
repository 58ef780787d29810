"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

The compatibility matrix's LeRobot side (rows in `matrix_rows.py`):

    python lerobot_matrix.py generate ROWS.json OUT   # LeRobot writes (and edits) every row
    python lerobot_matrix.py dump JOBS.json           # LeRobot reads datasets rlctl wrote

`generate` writes, per row, `OUT/<id>/dataset` with `LeRobotDataset.create` and the row's
settings (video encoder, file-size limits, chunk size, images instead of video), then applies
the row's edit with LeRobot's own tools (`dataset_tools`: delete, split, merge, add and remove
features, modify tasks, convert images to video, re-encode videos; the v2.1 converter on a v2.1
copy written here by hand). It then reads the result with `LeRobotDataset` and dumps every item
(`items.npz`, strings in `summary.json`). A row that fails leaves `error.txt` instead, so one
broken setting does not hide the others.

`dump` reads each job's `root` with the job's `deltas` and writes the same `items.npz` and
`summary.json` into the job's `out` folder (or `error.txt`).

Prints one JSON line: the ids of the rows or jobs and "ok" or "error".
"""

import io
import json
import shutil
import sys
import traceback
from fractions import Fraction
from pathlib import Path

import av
import datasets
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import matrix_rows as rows
from lerobot.configs.video import RGBEncoderConfig
from lerobot.datasets import dataset_tools
from lerobot.datasets.feature_utils import get_hf_features_from_features
from lerobot.datasets.lerobot_dataset import LeRobotDataset

REPO = "rlctl/matrix"


def write(root: Path, row: dict, episodes: list[list[str]], seed: int = 0) -> LeRobotDataset:
    features = {k: {**v, "shape": tuple(v["shape"])} for k, v in row["features"].items()}
    dataset = LeRobotDataset.create(
        REPO,
        fps=row["fps"],
        features=features,
        root=root,
        use_videos=row["use_videos"],
        rgb_encoder=RGBEncoderConfig(**row["video"]) if row["video"] else None,
        data_files_size_in_mb=row["data_files_size_in_mb"],
        video_files_size_in_mb=row["video_files_size_in_mb"],
    )
    if row["chunks_size"]:
        dataset.meta.update_chunk_settings(chunks_size=row["chunks_size"])
    add_episodes(dataset, row, episodes, seed)
    return LeRobotDataset(REPO, root=root, video_backend="pyav")


def add_episodes(dataset, row: dict, episodes: list[list[str]], seed=0, first: int = 0) -> None:
    """Episodes `first`, `first + 1`... of `episodes` (their values numbered from `first`)."""
    for ep in range(first, len(episodes)):
        for t, task in enumerate(episodes[ep]):
            dataset.add_frame({**rows.frame_values(row["features"], ep, t, seed), "task": task})
        dataset.save_episode()
    dataset.finalize()


def edit(folder: Path, row: dict) -> Path:
    """Writes the row's dataset (editing it with LeRobot's tools); returns its root."""
    change = row["edit"]
    target = folder / "dataset"
    if change is None:
        write(target, row, row["episodes"])
        return target
    tool = change["tool"]
    if tool == "convert_v21":
        from lerobot.scripts.convert_dataset_v21_to_v30 import convert_dataset

        write_v21(folder / "v21", row)
        shutil.copytree(folder / "v21", target)
        convert_dataset(REPO, root=target, push_to_hub=False)
        shutil.rmtree(folder / "dataset_old")
        return target
    if tool == "resume":
        first = change["first"]
        write(target, row, row["episodes"][:first])
        encoder = RGBEncoderConfig(**row["video"]) if row["video"] else None
        resumed = LeRobotDataset.resume(REPO, root=target, rgb_encoder=encoder)
        add_episodes(resumed, row, row["episodes"], first=first)
        return target
    source = write(folder / "source", row, row["episodes"])
    if tool == "delete":
        dataset_tools.delete_episodes(source, change["episodes"], output_dir=target, repo_id=REPO)
    elif tool == "split":
        rest = [e for e in range(len(row["episodes"])) if e not in change["episodes"]]
        splits = {"part": change["episodes"], "rest": rest}
        dataset_tools.split_dataset(source, splits, output_dir=folder / "split")
        shutil.move(folder / "split" / "part", target)
    elif tool == "merge":
        other = write(folder / "other", row, rows.merged_episodes(row), seed=1)
        dataset_tools.merge_datasets([source, other], REPO, output_dir=target)
    elif tool == "add_features":
        total = sum(len(ep) for ep in row["episodes"])
        added = {
            key: (np.stack([rows.added_value(key, i) for i in range(total)]), spec)
            for key, spec in rows.ADDED.items()
        }
        dataset_tools.add_features(source, added, output_dir=target, repo_id=REPO)
    elif tool == "remove_features":
        dataset_tools.remove_feature(source, change["keys"], output_dir=target, repo_id=REPO)
    elif tool == "modify_tasks":  # in place, LeRobot's only mode
        episode_tasks = {int(k): v for k, v in change["episode_tasks"].items()}
        dataset_tools.modify_tasks(source, new_task=change["new_task"], episode_tasks=episode_tasks)
        shutil.move(folder / "source", target)
    elif tool == "convert_images_to_video":
        encoder = RGBEncoderConfig(**change["video"])
        dataset_tools.convert_image_to_video_dataset(
            source, output_dir=target, repo_id=REPO, rgb_encoder=encoder
        )
    elif tool == "reencode_videos":  # in place, as LeRobot's handler does on its copy
        dataset_tools.reencode_dataset(source, rgb_encoder=RGBEncoderConfig(**change["video"]))
        shutil.move(folder / "source", target)
    else:
        raise ValueError(f"unknown edit {tool!r}")
    return target


# --- a v2.1 dataset, written as LeRobot 0.5 wrote them -----------------------------------------


def _png(array: np.ndarray) -> dict:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return {"bytes": buffer.getvalue(), "path": None}


def _encode(frames: list, path: Path, fps: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        stream.time_base = Fraction(1, fps)
        stream.options = {"crf": "18", "g": "2", "bf": "0"}
        for number, array in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(array, format="rgb24")
            frame.pts = number
            out.mux(stream.encode(frame))
        out.mux(stream.encode())


def _stats(values: np.ndarray, camera: bool) -> dict:
    if camera:  # (T, H, W, C) -> per channel, (C, 1, 1), in [0, 1]
        values = values.transpose(0, 3, 1, 2).astype(np.float64) / 255.0
        axes, keep = (0, 2, 3), True
    else:
        values, axes, keep = values.astype(np.float64), 0, False
    out = {
        name: np.asarray(fn(values, axis=axes, keepdims=keep))[0 if keep else ...].tolist()
        for name, fn in (("min", np.min), ("max", np.max), ("mean", np.mean), ("std", np.std))
    }
    out["count"] = [len(values)]
    return out


def write_v21(root: Path, row: dict) -> None:
    features = row["features"]
    fps = row["fps"]
    video_keys = [k for k, f in features.items() if f["dtype"] == "video"]
    all_features = {
        **features,
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }
    hf = get_hf_features_from_features(
        {k: {**v, "shape": tuple(v["shape"])} for k, v in all_features.items()}
    )
    tasks = list(dict.fromkeys(t for ep in row["episodes"] for t in ep))
    lines = {"episodes": [], "tasks": [], "episodes_stats": []}
    lines["tasks"] = [{"task_index": i, "task": t} for i, t in enumerate(tasks)]
    index = 0
    for ep, ep_tasks in enumerate(row["episodes"]):
        values = [rows.frame_values(features, ep, t) for t in range(len(ep_tasks))]
        columns: dict = {key: [] for key in all_features if key not in video_keys}
        for t, frame in enumerate(values):
            for key, spec in features.items():
                if spec["dtype"] == "image":
                    columns[key].append(_png(frame[key]))
                elif spec["dtype"] != "video":
                    value = frame[key]
                    columns[key].append(value.item() if spec["shape"] == [1] else value)
            columns["timestamp"].append(np.float32(t / fps))
            columns["frame_index"].append(t)
            columns["episode_index"].append(ep)
            columns["index"].append(index + t)
            columns["task_index"].append(tasks.index(ep_tasks[t]))
        index += len(values)
        path = root / f"data/chunk-000/episode_{ep:06d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(columns, features=hf).to_parquet(str(path))
        for key in video_keys:
            frames = [frame[key] for frame in values]
            _encode(frames, root / f"videos/chunk-000/{key}/episode_{ep:06d}.mp4", fps)
        stats = {}
        for key, spec in all_features.items():
            if spec["dtype"] == "string":
                continue
            if key in features:
                array = np.stack([np.asarray(frame[key]) for frame in values])
            else:
                array = np.asarray(columns[key])
            stats[key] = _stats(array, spec["dtype"] in ("image", "video"))
        lines["episodes_stats"].append({"episode_index": ep, "stats": stats})
        lines["episodes"].append(
            {"episode_index": ep, "tasks": list(dict.fromkeys(ep_tasks)), "length": len(values)}
        )
    (root / "meta").mkdir(parents=True, exist_ok=True)
    for name, entries in lines.items():
        text = "".join(json.dumps(line) + "\n" for line in entries)
        (root / f"meta/{name}.jsonl").write_text(text)
    info_features = json.loads(json.dumps(features))
    for key in video_keys:
        info_features[key]["info"] = {
            "video.fps": float(fps),
            "video.height": rows.HEIGHT,
            "video.width": rows.WIDTH,
            "video.channels": 3,
            "video.codec": "h264",
            "video.pix_fmt": "yuv420p",
            "video.is_depth_map": False,
            "has_audio": False,
        }
    for key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        info_features[key] = all_features[key]
    total = sum(len(ep) for ep in row["episodes"])
    info = {
        "codebase_version": "v2.1",
        "robot_type": None,
        "total_episodes": len(row["episodes"]),
        "total_frames": total,
        "total_tasks": len(tasks),
        "total_videos": len(video_keys) * len(row["episodes"]),
        "total_chunks": 1,
        "chunks_size": 1000,
        "fps": fps,
        "splits": {"train": f"0:{len(row['episodes'])}"},
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": (
            "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
            if video_keys
            else None
        ),
        "features": info_features,
    }
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))


# --- reading -------------------------------------------------------------------------------------


def dump(root: Path, deltas: dict, out: Path, subset: list | None = None) -> None:
    """Every item into `out`; with `subset`, also those of the subset's read (`out/subset`)."""
    if subset:
        (out / "subset").mkdir(exist_ok=True)
        read(root, deltas, out / "subset", subset)
    read(root, deltas, out)


def read(root: Path, deltas: dict, out: Path, episodes: list | None = None) -> None:
    dataset = LeRobotDataset(REPO, root=root, video_backend="pyav")
    present = {k: v for k, v in deltas.items() if k in dataset.meta.features}
    dataset = LeRobotDataset(
        REPO, root=root, delta_timestamps=present, episodes=episodes, video_backend="pyav"
    )
    arrays, strings = {}, []
    for i in range(len(dataset)):
        item = dataset[i]
        strings.append({k: v for k, v in item.items() if isinstance(v, str)})
        for key, value in item.items():
            if not isinstance(value, str):
                arrays[f"{i}/{key}"] = value.numpy()
    np.savez(out / "items.npz", **arrays)
    summary = {
        "len": len(dataset),
        "episodes": dataset.meta.total_episodes,
        "strings": strings,
        "tasks": list(dataset.meta.tasks.index),
        "features": sorted(dataset.meta.features),
    }
    (out / "summary.json").write_text(json.dumps(summary))


def attempt(folder: Path, work, *args) -> str:
    try:
        work(*args)
        return "ok"
    except Exception:
        (folder / "error.txt").write_text(traceback.format_exc())
        return "error"


def generate_row(folder: Path, row: dict) -> None:
    dump(edit(folder, row), row["deltas"], folder, row["subset"])


def generate(rows_path: str, out: str) -> dict:
    results = {}
    for row in json.loads(Path(rows_path).read_text()):
        folder = Path(out) / row["id"]
        if (folder / "summary.json").exists() or (folder / "error.txt").exists():
            results[row["id"]] = "cached"
            continue
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        results[row["id"]] = attempt(folder, generate_row, folder, row)
    return results


def dump_jobs(jobs_path: str) -> dict:
    results = {}
    for job in json.loads(Path(jobs_path).read_text()):
        out = Path(job["out"])
        out.mkdir(parents=True, exist_ok=True)
        results[job["id"]] = attempt(
            out, dump, Path(job["root"]), job["deltas"], out, job["subset"]
        )
    return results


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        print(json.dumps(generate(sys.argv[2], sys.argv[3])))
    else:
        print(json.dumps(dump_jobs(sys.argv[2])))
