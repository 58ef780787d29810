"""Evaluation speed on PushT: wall time and command-to-first-env-step (goal: >= 3x faster than
lerobot-eval on the same checkpoint, <= 3 s to the first step; see ../shared/bench/README.md).

Usage:
    uv run python benchmarks/eval_pusht.py [--episodes 8] [--policy PATH] [--batch-size 0]
        [--async auto|true|false] [--episode-length 300] [--repeat 1]
        [--lerobot-eval /tmp/lerobot-anchor/bin/lerobot-eval]

Both tools run as a user types them, each at its defaults (both render their first 10 episodes
to mp4): `rlctl eval --policy.path=P --env.type=pusht --eval.n_episodes=N` and the same with
`lerobot-eval`, timed from the spawn of the command to its exit. Prints one JSON line per run:
`wall_s`, `first_step_s` (spawn to the first env step, from rlctl's `first env step` log event),
`eval_s` (from eval_info.json), the plan chosen, and the success rate. Without `--policy` a
random policy acts (rlctl only). With `--lerobot-eval`, lerobot-eval runs the same episodes on the
same checkpoint after rlctl, and the ratio of wall times is printed last.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rlctl_command() -> list[str]:
    found = shutil.which("rlctl", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "rlctl"]


def measure_rlctl(args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            *rlctl_command(),
            "--log-format=json",
            "eval",
            "--env.type=pusht",
            f"--env.episode_length={args.episode_length}",
            f"--eval.n_episodes={args.episodes}",
            f"--eval.batch_size={args.batch_size}",
            f"--output_dir={Path(out) / 'eval'}",
            "--progress=silent",
        ]
        if args.use_async != "auto":
            cmd.append(f"--eval.use_async_envs={args.use_async}")
        cmd.append(f"--policy.path={args.policy}" if args.policy else "--policy.type=random")
        spawned = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.time() - spawned
        if proc.returncode != 0:
            raise SystemExit(proc.stdout[-2000:] + proc.stderr[-4000:])
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        events += [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
        first = next((e for e in events if e.get("event") == "first env step"), {})
        plan = next((e for e in events if "batch_size" in e and "use_async" in e), {})
        info = json.loads((Path(out) / "eval" / "eval_info.json").read_text())
    return {
        "tool": "rlctl",
        "wall_s": round(wall, 3),
        "first_step_s": round(first["at"] - spawned, 3) if "at" in first else None,
        "eval_s": round(info["overall"]["eval_s"], 3),
        "batch_size": plan.get("batch_size"),
        "use_async": plan.get("use_async"),
        "n_episodes": info["overall"]["n_episodes"],
        "pc_success": info["overall"]["pc_success"],
    }


def measure_lerobot(args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            args.lerobot_eval,
            f"--policy.path={args.policy}",
            "--env.type=pusht",
            f"--env.episode_length={args.episode_length}",
            f"--eval.n_episodes={args.episodes}",
            f"--eval.batch_size={args.batch_size}",
            "--policy.device=cpu",
            f"--output_dir={Path(out) / 'eval'}",
        ]
        spawned = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.time() - spawned
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-4000:])
        info = json.loads((Path(out) / "eval" / "eval_info.json").read_text())
    return {
        "tool": "lerobot-eval",
        "wall_s": round(wall, 3),
        "eval_s": round(info["overall"]["eval_s"], 3),
        "n_episodes": info["overall"]["n_episodes"],
        "pc_success": info["overall"]["pc_success"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--policy", help="a pretrained_model folder (default: a random policy)")
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument(
        "--async", dest="use_async", default="auto", choices=["auto", "true", "false"]
    )
    parser.add_argument("--episode-length", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--lerobot-eval", help="path of lerobot-eval, run once after rlctl")
    args = parser.parse_args()
    if args.lerobot_eval and not args.policy:
        raise SystemExit("--lerobot-eval needs --policy (the same checkpoint for both tools)")
    walls = []
    for _ in range(args.repeat):
        result = measure_rlctl(args)
        walls.append(float(result["wall_s"]))  # type: ignore[arg-type]
        print(json.dumps(result), flush=True)
    if args.lerobot_eval:
        theirs = measure_lerobot(args)
        print(json.dumps(theirs), flush=True)
        ratio = float(theirs["wall_s"]) / min(walls)  # type: ignore[arg-type]
        print(json.dumps({"wall_ratio_lerobot_over_rlctl": round(ratio, 2)}), flush=True)


if __name__ == "__main__":
    main()
