"""Training throughput: rlctl vs lerobot-train, ACT with LeRobot's default config, batch 8.

    python benchmarks/train_throughput.py [--root /tmp/anchor_train/anchor_ds] [--steps 12]
        [--warmup 3] [--rounds 2] [--num-workers 4] [--lerobot PATH/TO/lerobot-train]
        [--cpu-kernels auto|torch]

The dataset is the one `../shared/bench/lerobot_anchor.py /tmp/anchor_train --episodes 10
--frames 200` writes (two 240x320 AV1 cameras, 6-dof state and action). Both tools train the
same policy (ACT defaults; the ResNet-18 starts from random weights because this machine is
offline) for the same steps; the first `--warmup` steps are left out. The tools alternate for
`--rounds` rounds. Prints one JSON line per run, then the ratios of rlctl's throughput to
LeRobot's (from the mean, the median and the fastest step), and each round's ratio with their
median (the two runs of a round are minutes apart, so the machine's slow spells touch them alike).
rlctl trains with `--cpu-kernels` (its `--cpu_kernels` setting: `auto`, rlctl's CPU speed paths,
or `torch`, torch's own modules); its line says which:

    samples_per_s   batch / (data wait + update), averaged over the measured steps (LeRobot's
                    own definition of its `smp/s`)
    wall_samples_per_s  samples over the wall time of the measured steps (checkpointing off)
    data_wait       the share of step time spent waiting for the batch
    s_per_step      seconds per step (update + data wait); median_ and best_ likewise

Run both in one session, one after the other; these machines are noisy, so quote the ratio.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path("/tmp/anchor_train/anchor_ds")
DEFAULT_LEROBOT = Path("/tmp/lerobot-anchor/bin/lerobot-train")


def summary(batch: int, update_s: list[float], data_s: list[float], wall_s: float) -> dict:
    busy = sum(update_s) + sum(data_s)
    steps = len(update_s)
    per_step = [u + d for u, d in zip(update_s, data_s)]
    return {
        "steps": steps,
        "samples_per_s": round(batch * steps / busy, 3),
        "wall_samples_per_s": round(batch * steps / wall_s, 3) if wall_s else None,
        "data_wait": round(sum(data_s) / busy, 4),
        "s_per_step": round(busy / steps, 3),
        # Robust to other users of the machine: the typical and the least disturbed step.
        "median_s_per_step": round(statistics.median(per_step), 3),
        "best_s_per_step": round(min(per_step), 3),
    }


class StepTimes:
    """A metrics sink keeping each step's figures and when it was logged."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, dict[str, float]]] = []

    def write(self, step: int, metrics: Any, *, phase: str = "train") -> None:
        self.rows.append((time.perf_counter(), dict(metrics)))

    def close(self) -> None:
        pass


def run_rlctl(args: argparse.Namespace, out: Path) -> dict:
    from rlctl.domain.policies import ACTConfig
    from rlctl.domain.train_settings import DatasetSource, TrainSettings
    from rlctl.entrypoints.container import build_container
    from rlctl.entrypoints.settings import AppSettings, DatasetSettings

    settings = TrainSettings(
        dataset=DatasetSource(root=str(args.root)),
        policy=ACTConfig(pretrained_backbone_weights=None, device=args.device),
        output_dir=str(out),
        steps=args.warmup + args.steps,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        log_freq=1,
        save_checkpoint=False,
        eval_freq=0,
        cpu_kernels=args.cpu_kernels,
    )
    sink = StepTimes()
    # As `rlctl train`, which owns its process: the allocator keeps freed memory (with auto).
    app = AppSettings(dataset=DatasetSettings(video_backend=args.video_backend), progress="silent")
    container = build_container(app, owns_process=True)
    container.train_policy(metrics=sink)(settings)
    measured = sink.rows[args.warmup :]
    wall = measured[-1][0] - sink.rows[args.warmup - 1][0] if args.warmup else 0.0
    return {
        "tool": "rlctl",
        "cpu_kernels": args.cpu_kernels,
        **summary(
            args.batch_size,
            [m["update_s"] for _, m in measured],
            [m["dataloading_s"] for _, m in measured],
            wall,
        ),
    }


LEROBOT_LINE = re.compile(r"step:(\S+) .*updt_s:([\d.]+) data_s:([\d.]+)")


def run_lerobot(args: argparse.Namespace, out: Path) -> dict:
    command = [
        str(args.lerobot),
        "--dataset.repo_id=local",
        f"--dataset.root={args.root}",
        f"--dataset.video_backend={args.video_backend}",
        "--policy.type=act",
        "--policy.pretrained_backbone_weights=null",
        "--policy.push_to_hub=false",
        f"--policy.device={args.device}",
        f"--batch_size={args.batch_size}",
        f"--num_workers={args.num_workers}",
        f"--steps={args.warmup + args.steps}",
        "--log_freq=1",
        "--save_checkpoint=false",
        "--wandb.enable=false",
        f"--output_dir={out}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    log = done.stdout + done.stderr
    rows = [(m.group(2), m.group(3)) for m in LEROBOT_LINE.finditer(log)]
    if done.returncode != 0 or len(rows) < args.warmup + args.steps:
        tail = "\n".join(log.splitlines()[-15:])
        raise SystemExit(f"lerobot-train failed (exit {done.returncode}):\n{tail}")
    measured = rows[args.warmup :]
    return {
        "tool": "lerobot",
        **summary(
            args.batch_size, [float(u) for u, _ in measured], [float(d) for _, d in measured], 0.0
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--video-backend", default="pyav")
    parser.add_argument("--lerobot", type=Path, default=DEFAULT_LEROBOT)
    parser.add_argument("--only", choices=["rlctl", "lerobot"], default=None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cpu-kernels", choices=["auto", "torch"], default="auto")
    args = parser.parse_args()
    if not (args.root / "meta" / "info.json").is_file():
        raise SystemExit(
            f"no dataset at {args.root}: run ../shared/bench/lerobot_anchor.py /tmp/anchor_train "
            "--episodes 10 --frames 200 with LeRobot's python first"
        )
    tools = [t for t in ("rlctl", "lerobot") if args.only in (None, t)]
    if "lerobot" in tools and not args.lerobot.exists():
        print(f"lerobot-train not found at {args.lerobot}; skipping it", file=sys.stderr)
        tools.remove("lerobot")
    runners = {"rlctl": run_rlctl, "lerobot": run_lerobot}
    results: dict[str, list[dict]] = {tool: [] for tool in tools}
    # Alternate the tools round by round, so that a busy spell of the machine hits both.
    for round_ in range(args.rounds):
        for tool in tools:
            with tempfile.TemporaryDirectory() as tmp:
                result = runners[tool](args, Path(tmp) / tool)
                shutil.rmtree(tmp, ignore_errors=True)
            result["round"] = round_
            results[tool].append(result)
            print(json.dumps(result), flush=True)
    if len(tools) == 2:

        def typical(tool: str, key: str) -> float:
            return statistics.median(r[key] for r in results[tool])

        print(
            json.dumps(
                {
                    "rlctl_over_lerobot_mean": round(
                        typical("lerobot", "s_per_step") / typical("rlctl", "s_per_step"), 3
                    ),
                    "rlctl_over_lerobot_median": round(
                        typical("lerobot", "median_s_per_step")
                        / typical("rlctl", "median_s_per_step"),
                        3,
                    ),
                    "rlctl_over_lerobot_best": round(
                        min(r["best_s_per_step"] for r in results["lerobot"])
                        / min(r["best_s_per_step"] for r in results["rlctl"]),
                        3,
                    ),
                    # Each round's two runs are minutes apart: their ratio is the least
                    # touched by the machine's slower and faster spells.
                    "paired_ratio_per_round": [
                        round(theirs["s_per_step"] / ours["s_per_step"], 3)
                        for ours, theirs in zip(results["rlctl"], results["lerobot"])
                    ],
                    "paired_ratio_median": round(
                        statistics.median(
                            theirs["s_per_step"] / ours["s_per_step"]
                            for ours, theirs in zip(results["rlctl"], results["lerobot"])
                        ),
                        3,
                    ),
                }
            )
        )


if __name__ == "__main__":
    main()
