"""rlctl's side of `../shared/bench/lerobot_anchor.py`: the same figures for the same work.

    python benchmarks/dataset_io.py OUT [--mode read|write|all] [--backend auto|pyav|torchcodec]

`read` opens the dataset LeRobot wrote (`OUT/anchor_ds`, made by the anchor script, or
`--dataset PATH`) and measures `random_read_fps` (400 random indices, each with a 50-step action
chunk and every camera decoded) and `dataloader_fps` (torch DataLoader, 2 workers, batch 16,
shuffled); `write` writes the anchor's synthetic content with rlctl and measures `write_fps`.
Prints one JSON line with the anchor's fields. Run both scripts one after the other in one
session and compare ratios: these machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the anchor's OUT folder (its dataset is OUT/anchor_ds)")
    parser.add_argument("--mode", choices=("read", "write", "all"), default="read")
    parser.add_argument("--dataset", help="dataset to read (default: OUT/anchor_ds)")
    parser.add_argument("--backend", default=None, help="auto (default), pyav or torchcodec")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--hw", default="240x320")
    parser.add_argument("--cams", type=int, default=2)
    parser.add_argument("--dim", type=int, default=6)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--chunk", type=int, default=50, help="action chunk length")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    return parser.parse_args(argv)


def bytes_on_disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def measure_random_read(root: Path, args: argparse.Namespace) -> tuple[Any, float]:
    """Items per second for `--samples` random indices, each with a `--chunk`-step action chunk."""
    from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
    from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader

    fps = LeRobotMetaReader().read_meta(root).fps
    deltas = {"action": [i / fps for i in range(args.chunk)]}
    reader = LeRobotDatasetReader(root, delta_timestamps=deltas, video_backend=args.backend)
    indices = np.random.default_rng(1).integers(0, len(reader), size=args.samples)
    reader[int(indices[0])]  # as the anchor: the first item pays for opening files
    start = time.perf_counter()
    for index in indices:
        item = reader[int(index)]
    elapsed = time.perf_counter() - start
    assert tuple(item["action"].shape) == (args.chunk, args.dim), item["action"].shape
    return reader, args.samples / elapsed


def measure_dataloader(reader: Any, args: argparse.Namespace) -> float:
    """Items per second through a shuffled DataLoader, worker start-up included (as the anchor)."""
    import torch

    from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset

    dataset = LeRobotTorchDataset.from_reader(reader)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch, shuffle=True, num_workers=args.workers
    )
    start = time.perf_counter()
    seen = 0
    for batch in loader:
        seen += batch["action"].shape[0]
        if seen >= args.samples:
            break
    return seen / (time.perf_counter() - start)


def run_read(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.dataset) if args.dataset else Path(args.out) / "anchor_ds"
    if not (root / "meta" / "info.json").is_file():
        sys.exit(
            f"no dataset at {root}: create it first with LeRobot, e.g.\n"
            f"  /tmp/lerobot-anchor/bin/python ../shared/bench/lerobot_anchor.py {args.out}"
        )
    reader, random_fps = measure_random_read(root, args)
    loader_fps = measure_dataloader(reader, args)
    return {
        "frames": len(reader),
        "random_read_fps": round(random_fps, 1),
        "dataloader_fps": round(loader_fps, 1),
        "bytes_on_disk": bytes_on_disk(root),
    }


def run_write(args: argparse.Namespace) -> dict[str, Any]:
    """Write the anchor's synthetic content with rlctl's writer (see `dataset_write.py`)."""
    # Run as a script, this folder is sys.path[0].
    from dataset_write import write_rlctl

    figures = write_rlctl(args)
    return {k: figures[k] for k in ("frames", "write_fps", "peak_rss_mb", "bytes_on_disk")}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    figures: dict[str, Any] = {"system": "rlctl", "write_fps": math.nan}
    if args.mode in ("write", "all"):
        figures.update(run_write(args))
    if args.mode in ("read", "all"):
        figures.update(run_read(args))
    figures.update({"hw": args.hw, "cams": args.cams, "backend": args.backend})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
