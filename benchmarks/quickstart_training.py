"""`rlctl quickstart`'s training phase: its data wait (share of the step spent waiting for the
batch) and steps per second, three ways: batches from memory, normalised once (`memory`: now),
gathered from the columns batch by batch through the DataLoader (`gathered`: the backend's
`in_memory_batches=False`), and built item by item (`items`: the path state-only datasets took
before either).

    uv run python benchmarks/quickstart_training.py [--dataset ROOT] [--steps 2000] [--rounds 2]

Without `--dataset`, records quickstart's demonstrations first (`rlctl record` with
quickstart's arguments: Meta-World drawer-open-v3, 10 episodes, state only). Each run is
`rlctl train` with quickstart's arguments (MLP, batch 64, num_workers=0) in a fresh process;
the three alternate in each of `--rounds` rounds, each round starting with the next one.
Reported from the run's metrics.jsonl (every logged window after the first): data wait, ms per
step (data, update) and steps per second, and the train command's wall time. `--profile DIR`
runs each under cProfile and keeps its statistics as DIR/<loader>-<round>.prof (`python -m
pstats`); its figures carry the profiler's overhead, so time without it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from real_size import host_line

CHILD = r"""
import sys
from rlctl.entrypoints.cli.main import cli
from rlctl.entrypoints.cli.quickstart import train_args

mode, root, out, steps, profile = sys.argv[1:4] + [int(sys.argv[4]), sys.argv[5]]
if mode in ("items", "gathered"):
    import functools
    from rlctl.adapters.training.backend import TorchTrainingBackend
    TorchTrainingBackend.__init__ = functools.partialmethod(
        TorchTrainingBackend.__init__, in_memory_batches=False
    )
if mode == "items":
    from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset
    LeRobotTorchDataset.gathers = property(lambda self: False)
from pathlib import Path
args = ["train", *train_args(Path(root), Path(out), "mlp", steps, 64), "--log_freq=100"]
if profile:
    import cProfile
    cProfile.run("cli(args, standalone_mode=False)", profile)
else:
    cli(args, standalone_mode=True)
"""


def record(root: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "entrypoints"))
    from rlctl.entrypoints.cli.quickstart import DEFAULT_TASK, record_args

    command = ["rlctl", "record", *record_args(DEFAULT_TASK, root, 10)]
    subprocess.run([sys.executable, "-m", "rlctl", *command[1:]], check=True)


def train(mode: str, root: Path, out: Path, steps: int, profile: str = "") -> dict[str, float]:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(root), str(out), str(steps), profile],
        check=True,
        capture_output=True,
        env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")},
    )
    wall = time.perf_counter() - start
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]
    windows = [r for r in records if "data_wait" in r.get("metrics", r)][1:]
    figures = [r.get("metrics", r) for r in windows]
    data = statistics.mean(f["dataloading_s"] for f in figures)
    update = statistics.mean(f["update_s"] for f in figures)
    return {
        "data_wait": statistics.mean(f["data_wait"] for f in figures),
        "data_ms": 1000 * data,
        "update_ms": 1000 * update,
        "steps_per_s": 1 / (data + update),
        "train_wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", type=Path, help="a folder for each run's cProfile stats")
    args = parser.parse_args()
    print(host_line())
    with tempfile.TemporaryDirectory() as scratch:
        root = args.dataset or Path(scratch) / "data"
        if args.dataset is None:
            record(root)
        results: dict[str, list[dict[str, float]]] = {"items": [], "gathered": [], "memory": []}
        modes = list(results)
        for round_ in range(args.rounds):
            # Each round starts with another loader, so a load that rises or falls during a
            # round does not always favour the same one.
            for mode in modes[round_ % 3 :] + modes[: round_ % 3]:
                out = Path(scratch) / f"{mode}-{round_}"
                profile = ""
                if args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    profile = str(args.profile / f"{mode}-{round_}.prof")
                figures = train(mode, root, out, args.steps, profile)
                figures["load_1min"] = os.getloadavg()[0]
                results[mode].append(figures)
                print(json.dumps({"loader": mode, "round": round_, **figures}), flush=True)
    print(f"\nquickstart training phase, {args.steps} steps, median of {args.rounds} rounds")
    for mode, runs in results.items():
        median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"{mode:9} data wait {100 * median['data_wait']:5.1f} %   data "
            f"{median['data_ms']:6.2f} ms   update {median['update_ms']:5.2f} ms   "
            f"{median['steps_per_s']:6.1f} steps/s   train command {median['train_wall_s']:5.1f} s"
        )


if __name__ == "__main__":
    main()
