"""Streaming a dataset from a Hub against reading it from the local disk, at several sizes.

    python benchmarks/dataset_streaming.py OUT [--episodes 20,80,320] [--latency-ms 0]

For each size it writes a synthetic LeRobot v3.0 dataset with rlctl (`--frames` per episode, one
`--hw` video camera, small data and video files so that bigger datasets have more files), serves
it from a fake Hub on 127.0.0.1 (the one the tests use; `--latency-ms` delays every request, as
a distant Hub would), and measures through a torch DataLoader (`--workers`, `--batch`):

- `stream_first_batch_s`: from `StreamingLeRobotDataset(repo_id)` (fetching `meta/`) to the
  first batch; `stream_items_per_s` over the next `--batches` batches;
- `local_first_batch_s` / `local_items_per_s`: the same with the dataset already on disk
  (`LeRobotTorchDataset`, shuffled);
- `pull_s`: downloading the whole dataset first (`rlctl dataset pull`), what reading locally
  costs when the dataset is not there yet.

Items carry a 10-step action window and the camera frame. A first, uncounted pass over the
smallest size pays for imports and the video backend's probe. Prints one JSON line per size,
then a table. Time to the first stream batch depends on the shuffle buffer (`--buffer`), not on the
dataset's size; local reading and pulling grow with it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
REPO = "bench/streamed"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="a folder for the datasets and the caches")
    parser.add_argument("--episodes", default="20,80,320", help="dataset sizes, in episodes")
    parser.add_argument("--frames", type=int, default=100, help="frames per episode")
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--hw", default="96x128", help="camera height x width")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added to every request")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--batches", type=int, default=20, help="batches timed after the first")
    parser.add_argument("--buffer", type=int, default=1000, help="the stream's shuffle buffer")
    parser.add_argument("--backend", default=None, help="video backend: auto, pyav, torchcodec")
    parser.add_argument(
        "--data-mb",
        type=float,
        default=0.05,
        help="data_files_size_in_mb (LeRobot also rolls meta/episodes files over at this size, "
        "and a stream downloads all of meta/: small values make meta/ grow with the episodes)",
    )
    return parser.parse_args(argv)


def fake_hub_module() -> Any:
    path = REPO_ROOT / "tests" / "adapters" / "hub" / "conftest.py"
    spec = importlib.util.spec_from_file_location("fake_hub_conftest", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_hub(latency_s: float) -> tuple[Any, Any]:
    fake = fake_hub_module()
    hub = fake.FakeHub(max_requests=10**9)
    handle = hub.handle

    def slow(h: Any) -> None:
        time.sleep(latency_s)
        handle(h)

    if latency_s:
        hub.handle = slow
    return hub, fake.FakeHubServer(hub).start()


def picture(h: int, w: int, episode: int, t: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack(
        [(xx * 2 + 3 * t) % 256, (yy * 2 + 5 * episode) % 256, (xx + yy + 7 * t) % 256], axis=-1
    ).astype(np.uint8)


def write_dataset(root: Path, episodes: int, args: argparse.Namespace) -> None:
    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
    from rlctl.domain.features import FeatureSpec

    h, w = (int(v) for v in args.hw.split("x"))
    features = {
        "observation.state": FeatureSpec("observation.state", "float32", (6,)),
        "action": FeatureSpec("action", "float32", (6,)),
        "observation.images.front": FeatureSpec(
            "observation.images.front", "video", (h, w, 3), names=["height", "width", "channels"]
        ),
    }
    rng = np.random.default_rng(0)
    session = LeRobotV3Writer(options=WriterOptions(durable=False)).create(
        root,
        fps=args.fps,
        features=features,
        # At the default, about 10 episodes per data file and per video file: bigger datasets,
        # more files.
        data_files_size_in_mb=args.data_mb,
        video_files_size_in_mb=2.0,
    )
    with session:
        for episode in range(episodes):
            for t in range(args.frames):
                session.add_frame(
                    {
                        "observation.state": rng.standard_normal(6).astype(np.float32),
                        "action": rng.standard_normal(6).astype(np.float32),
                        "observation.images.front": picture(h, w, episode, t),
                        "task": "pick the cube",
                    }
                )
            session.save_episode()


def push(root: Path) -> None:
    from rlctl.adapters.hub.huggingface import HuggingFaceHub
    from rlctl.adapters.hub.layout import LeRobotLayout
    from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
    from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest

    PushDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())(
        PushDatasetRequest(str(root), REPO)
    )


def first_batch_and_rate(dataset: Any, started: float, args: argparse.Namespace) -> list[float]:
    from torch.utils.data import DataLoader, IterableDataset

    shuffle = None if isinstance(dataset, IterableDataset) else True
    loader = DataLoader(
        dataset, batch_size=args.batch, num_workers=args.workers, shuffle=shuffle, drop_last=True
    )
    batches = iter(loader)
    next(batches)
    first = time.perf_counter() - started
    counted, start = 0, time.perf_counter()
    for batch in batches:
        counted += len(batch["index"])
        if counted >= args.batches * args.batch:
            break
    return [first, counted / (time.perf_counter() - start)]


def measure(episodes: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from rlctl.adapters.hub.huggingface import HuggingFaceHub
    from rlctl.adapters.hub.layout import LeRobotLayout
    from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
    from rlctl.adapters.storage.streaming.dataset import StreamingLeRobotDataset
    from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset
    from rlctl.application.use_cases.pull_dataset import PullDataset, PullDatasetRequest

    root = work / f"local_{episodes}"
    if not (root / "meta" / "info.json").is_file():
        write_dataset(root, episodes, args)
    hub, server = start_hub(args.latency_ms / 1000)
    home = Path(tempfile.mkdtemp(prefix=f"hf_{episodes}_", dir=work))
    os.environ.update(
        HF_ENDPOINT=hub.url,
        HF_HOME=str(home),
        HF_LEROBOT_HOME=str(home / "lerobot"),
        HF_HUB_CACHE=str(home / "hub"),
    )
    try:
        push(root)
        fps = LeRobotMetaReader().read_meta(root).fps
        deltas = {"action": [i / fps for i in range(10)]}

        start = time.perf_counter()
        streamed = StreamingLeRobotDataset(
            REPO, delta_timestamps=deltas, buffer_size=args.buffer, video_backend=args.backend
        )
        stream = first_batch_and_rate(streamed, start, args)

        start = time.perf_counter()
        local_dataset = LeRobotTorchDataset(
            root, delta_timestamps=deltas, video_backend=args.backend
        )
        local = first_batch_and_rate(local_dataset, start, args)

        start = time.perf_counter()
        pull = PullDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())
        pull(PullDatasetRequest(REPO))
        pull_s = time.perf_counter() - start
    finally:
        server.stop()
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return {
        "episodes": episodes,
        "frames": episodes * args.frames,
        "dataset_mb": round(size / 2**20, 2),
        "data_files": len(list((root / "data").rglob("*.parquet"))),
        "latency_ms": args.latency_ms,
        "stream_first_batch_s": round(stream[0], 3),
        "stream_items_per_s": round(stream[1], 1),
        "local_first_batch_s": round(local[0], 3),
        "local_items_per_s": round(local[1], 1),
        "pull_s": round(pull_s, 3),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_TOKEN", "hf_fake_good_token")
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    sizes = [int(v) for v in args.episodes.split(",")]
    # The first reads of a process pay for imports and the video backend's probe: not counted.
    measure(sizes[0], args, work)
    rows = []
    for episodes in sizes:
        row = measure(episodes, args, work)
        print(json.dumps(row), flush=True)
        rows.append(row)
    columns = list(rows[0])
    print("\n" + " | ".join(columns))
    for row in rows:
        print(" | ".join(str(row[c]) for c in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
