"""Batches of a state-only dataset (what `rlctl quickstart` trains on): rlctl's batches from memory
(what training uses now: `column_batches`), rlctl gathering each batch from its columns through
a DataLoader, rlctl building it item by item, and LeRobot 0.6.1's LeRobotDataset, in one run.

    uv run python benchmarks/state_batches.py [--lerobot /path/to/lerobot/venv/bin/python]
        [--episodes 10] [--frames 500] [--batch 64] [--chunk 10] [--batches 200] [--rounds 3]

Writes a Meta-World-sized dataset with rlctl (39-d state, 4-d action, 10 Hz), then times
`--batches` shuffled batches of `--batch` items with the policy's windows (MLP's: an action
chunk of `--chunk`), read through a torch DataLoader in the main process (num_workers=0, as
quickstart trains). Each tool runs in its own fresh process; the tools alternate for `--rounds`
rounds. Prints one JSON line per run (ms per batch, median of the rounds in the summary), the
host line, and the ratios. LeRobot reads the same files (`--lerobot`: its venv's python; the
default looks for ../shared/bench's usual place, /tmp/lerobot-anchor).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from real_size import host_line

MEASURE = r"""
import json, sys, time
import numpy as np, torch
from torch.utils.data import DataLoader
tool, root, batch, chunk, batches = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
fps = 10
deltas = {"action": [i / fps for i in range(chunk)]}
torch.manual_seed(0)
if tool == "lerobot":
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    dataset = LeRobotDataset("local/state", root=root, delta_timestamps=deltas)
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=0, drop_last=True)
else:
    from rlctl.adapters.storage.collate import collate_items
    from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
    from rlctl.adapters.training.sampling import AugmentedItems, GatheredBatches, batch_as_is
    reader = LeRobotDatasetReader(root, delta_timestamps=deltas)
    order = torch.randperm(len(reader)).tolist()
    keys = [[(p, 0) for p in order[i : i + batch]] for i in range(0, len(order) - batch + 1, batch)]
    if tool == "rlctl-memory":
        from rlctl.adapters.training.column_batches import ColumnBatches
        from rlctl.adapters.training.sampling import StepBatchSampler
        sampler = StepBatchSampler(
            np.arange(len(reader)), batch_size=batch, seed=0, sample_seeds=False
        )
        loader = ColumnBatches(
            reader.numeric_columns(), sampler, check_unchanged=reader.check_unchanged
        )
    elif tool == "rlctl-gathered":
        loader = DataLoader(GatheredBatches(reader), batch_sampler=keys, collate_fn=batch_as_is)
    else:
        items = AugmentedItems(reader, [], None)
        loader = DataLoader(items, batch_sampler=keys, collate_fn=collate_items)
done, start = 0, None
while done < batches:
    for b in loader:
        assert b["action"].shape == (batch, chunk, 4), b["action"].shape
        if start is None:
            start = time.perf_counter()  # the first batch pays for opening files
            continue
        done += 1
        if done == batches:
            break
print(json.dumps({"tool": tool, "ms_per_batch": 1000 * (time.perf_counter() - start) / batches}))
"""


def write_dataset(root: Path, episodes: int, frames: int) -> None:
    import numpy as np

    import rlctl.api

    features = {
        "observation.state": {"dtype": "float32", "shape": [39], "names": None},
        "action": {"dtype": "float32", "shape": [4], "names": None},
    }
    session = rlctl.api.create_dataset(root, fps=10, features=features)
    rng = np.random.default_rng(0)
    for _ in range(episodes):
        for _ in range(frames):
            session.add_frame(
                {
                    "observation.state": rng.normal(size=39).astype(np.float32),
                    "action": rng.normal(size=4).astype(np.float32),
                    "task": "open the drawer",
                }
            )
        session.save_episode()
    session.finalize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lerobot", default="/tmp/lerobot-anchor/bin/python")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--chunk", type=int, default=10)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(host_line(), flush=True)
    tools = {
        "rlctl-memory": sys.executable,
        "rlctl-gathered": sys.executable,
        "rlctl-items": sys.executable,
    }
    if Path(args.lerobot).exists():
        tools["lerobot"] = args.lerobot
    else:
        print(f"LeRobot not found at {args.lerobot}: rlctl only", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "state"
        write_dataset(root, args.episodes, args.frames)
        times: dict[str, list[float]] = {tool: [] for tool in tools}
        for _ in range(args.rounds):
            for tool, python in tools.items():
                out = subprocess.run(
                    [python, "-c", MEASURE, tool, str(root), str(args.batch), str(args.chunk),
                     str(args.batches)],
                    capture_output=True, text=True, timeout=900, check=True,
                ).stdout  # fmt: skip
                line = json.loads(out.strip().splitlines()[-1])
                print(json.dumps(line), flush=True)
                times[tool].append(line["ms_per_batch"])
    median = {tool: statistics.median(values) for tool, values in times.items()}
    summary = {f"{tool}_ms_per_batch": round(ms, 3) for tool, ms in median.items()}
    summary["gathered_vs_items"] = round(median["rlctl-items"] / median["rlctl-gathered"], 1)
    summary["memory_vs_gathered"] = round(median["rlctl-gathered"] / median["rlctl-memory"], 1)
    if "lerobot" in median:
        summary["gathered_vs_lerobot"] = round(median["lerobot"] / median["rlctl-gathered"], 1)
        summary["memory_vs_lerobot"] = round(median["lerobot"] / median["rlctl-memory"], 1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
