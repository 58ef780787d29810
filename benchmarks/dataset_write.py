"""Write speed and peak memory of recording a dataset, rlctl against LeRobot 0.6.1.

The content and fields are those of `../shared/bench/lerobot_anchor.py`: smooth moving gradients
for each camera, random 6-dof state and action, tasks "task 0..2", AV1 video with LeRobot's
settings; `write_fps` counts frames (all cameras of one step) per second from creating the
dataset to finalizing it, encoding included. `peak_rss_mb` is the largest summed resident memory
of the process and its children (encoder processes, LeRobot's encoding pool), sampled every 20 ms.

Usage:
    python benchmarks/dataset_write.py OUT [--episodes 10 --frames 200 --hw 240x320 --cams 2]
        [--lerobot-python /tmp/lerobot-anchor/bin/python [--repeat 3]]

With --lerobot-python, the same content is also written by LeRobot (its `LeRobotDataset.create`,
`add_frame`, `save_episode`, `finalize`, as in the anchor script, without the read part) in that
interpreter, measured the same way, and a second JSON line is printed. `--repeat N` alternates the
two systems N times and ends with the median `write_fps` of each and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np


def frame_image(ep: int, t: int, cam: int, h: int, w: int) -> np.ndarray:
    """The anchor script's camera frame, unchanged, so both systems encode the same pictures."""
    yy, xx = np.mgrid[0:h, 0:w]
    r = ((xx + 3 * t + 17 * ep) % 256).astype(np.uint8)
    g = ((yy + 2 * t + 31 * cam) % 256).astype(np.uint8)
    b = (((xx + yy) // 2 + t) % 256).astype(np.uint8)
    return np.stack([r, g, b], axis=-1)


class PeakMemory:
    """Samples the summed RSS of a process tree in a thread; `peak_mb` once stopped."""

    def __init__(self, pid: int, interval_s: float = 0.02) -> None:
        import psutil  # here, so that LeRobot's interpreter can import frame_image without it

        self._no_process = psutil.NoSuchProcess
        self._process = psutil.Process(pid)
        self._interval = interval_s
        self._stop = threading.Event()
        self.peak_bytes = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree_rss(self) -> int:
        total = 0
        try:
            processes = [self._process, *self._process.children(recursive=True)]
        except self._no_process:
            return 0
        for process in processes:
            with contextlib.suppress(self._no_process):
                total += process.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._tree_rss())
            self._stop.wait(self._interval)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return round(self.peak_bytes / 2**20, 1)


def _features(args: argparse.Namespace, h: int, w: int) -> tuple[dict, list[str]]:
    names = [f"joint_{i}" for i in range(args.dim)]
    features = {
        "observation.state": {"dtype": "float32", "shape": [args.dim], "names": names},
        "action": {"dtype": "float32", "shape": [args.dim], "names": names},
    }
    cams = [f"observation.images.cam{c}" for c in range(args.cams)]
    for key in cams:
        features[key] = {
            "dtype": "video",
            "shape": [h, w, 3],
            "names": ["height", "width", "channels"],
        }
    return features, cams


def write_rlctl(args: argparse.Namespace) -> dict:
    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer

    h, w = (int(x) for x in args.hw.split("x"))
    root = Path(args.out) / "rlctl_ds"
    shutil.rmtree(root, ignore_errors=True)
    features, cams = _features(args, h, w)
    memory = PeakMemory(os.getpid())
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    session = LeRobotV3Writer().create(root, fps=args.fps, features=features)
    for ep in range(args.episodes):
        for t in range(args.frames):
            frame = {
                "observation.state": rng.standard_normal(args.dim).astype(np.float32),
                "action": rng.standard_normal(args.dim).astype(np.float32),
                "task": f"task {ep % 3}",
            }
            for c, key in enumerate(cams):
                frame[key] = frame_image(ep, t, c, h, w)
            session.add_frame(frame)
        session.save_episode()
    session.finalize()
    seconds = time.perf_counter() - start
    return _figures("rlctl", args, seconds, memory.stop(), root)


_LEROBOT_WRITE = """
import shutil, sys, time, json
import numpy as np
sys.path.insert(0, {bench_dir!r})
from dataset_write import frame_image
from lerobot.datasets.lerobot_dataset import LeRobotDataset
args = json.loads({args!r})
features = json.loads({features!r})
for f in features.values():
    f["shape"] = tuple(f["shape"])
root = {root!r}
shutil.rmtree(root, ignore_errors=True)
h, w = args["h"], args["w"]
rng = np.random.default_rng(0)
t0 = time.perf_counter()
ds = LeRobotDataset.create(
    "anchor/bench", fps=args["fps"], features=features, root=root, use_videos=True
)
for ep in range(args["episodes"]):
    for t in range(args["frames"]):
        fr = {{
            "observation.state": rng.standard_normal(args["dim"]).astype(np.float32),
            "action": rng.standard_normal(args["dim"]).astype(np.float32),
            "task": f"task {{ep % 3}}",
        }}
        for c, k in enumerate(args["cams"]):
            fr[k] = frame_image(ep, t, c, h, w)
        ds.add_frame(fr)
    ds.save_episode()
ds.finalize()
print(json.dumps({{"seconds": time.perf_counter() - t0}}))
"""


def write_lerobot(args: argparse.Namespace, python: str) -> dict:
    h, w = (int(x) for x in args.hw.split("x"))
    root = Path(args.out) / "lerobot_ds"
    features, cams = _features(args, h, w)
    script = _LEROBOT_WRITE.format(
        bench_dir=str(Path(__file__).resolve().parent),
        args=json.dumps({**vars(args), "h": h, "w": w, "cams": cams}),
        features=json.dumps(features),
        root=str(root),
    )
    process = subprocess.Popen([python, "-c", script], stdout=subprocess.PIPE, text=True)
    memory = PeakMemory(process.pid)
    out, _ = process.communicate()
    peak = memory.stop()
    if process.returncode != 0:
        raise SystemExit(f"LeRobot's write failed (exit code {process.returncode})")
    seconds = json.loads(out.strip().splitlines()[-1])["seconds"]
    return _figures("lerobot", args, seconds, peak, root)


def _figures(
    system: str, args: argparse.Namespace, seconds: float, peak_mb: float, root: Path
) -> dict:
    frames = args.episodes * args.frames
    return {
        "system": system,
        "frames": frames,
        "write_fps": round(frames / seconds, 1),
        "peak_rss_mb": peak_mb,
        "bytes_on_disk": sum(p.stat().st_size for p in root.rglob("*") if p.is_file()),
        "hw": args.hw,
        "cams": args.cams,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--hw", default="240x320")
    parser.add_argument("--cams", type=int, default=2)
    parser.add_argument("--dim", type=int, default=6)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--lerobot-python", default=None)
    parser.add_argument("--repeat", type=int, default=1, help="alternated runs of each system")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {"rlctl": [], "lerobot": []}
    # Alternate the systems so that both see the same (noisy) machine.
    for _ in range(args.repeat):
        runs["rlctl"].append(write_rlctl(args))
        print(json.dumps(runs["rlctl"][-1]), flush=True)
        if args.lerobot_python:
            runs["lerobot"].append(write_lerobot(args, args.lerobot_python))
            print(json.dumps(runs["lerobot"][-1]), flush=True)
    if args.lerobot_python and args.repeat > 1:
        median = {k: statistics.median(r["write_fps"] for r in v) for k, v in runs.items()}
        peak = {k: max(r["peak_rss_mb"] for r in v) for k, v in runs.items()}
        print(
            json.dumps(
                {
                    "summary": f"median of {args.repeat} alternated runs",
                    "write_fps": median,
                    "write_fps_ratio": round(median["rlctl"] / median["lerobot"], 2),
                    "peak_rss_mb_max": peak,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
