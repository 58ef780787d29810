"""Evaluation speed on PushT: wall time and command-to-first-env-step (goal: >= 3x faster than
lerobot-eval on the same checkpoint, <= 3 s to the first step; see ../shared/bench/README.md).

Usage:
    uv run python benchmarks/eval_pusht.py [--episodes 8] [--policy PATH] [--batch-size 0]
        [--async auto|true|false] [--episode-length 300] [--repeat 1]
        [--lerobot-eval /tmp/lerobot-anchor/bin/lerobot-eval]

Each run is a fresh Python process (imports count, as they do for a user), timed from its
spawn. Prints one JSON line per run: `wall_s`, `first_step_s` (spawn to the first env step),
`eval_s` (the use case alone), the plan chosen, and the success rate. Without `--policy` a
random policy acts (until `rlctl.api.load_policy` exists). With `--lerobot-eval`, lerobot-eval
runs the same episodes on the same checkpoint and its wall time is printed beside ours.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(args: argparse.Namespace) -> None:
    """The measured process: build everything, evaluate, report times relative to spawn."""
    from rlctl.adapters.memory.progress import SilentProgress
    from rlctl.adapters.sim.envs.pusht import PushtEnv
    from rlctl.adapters.sim.simulation import GymSimulation
    from rlctl.application.use_cases.evaluate_policy import EvalSettings, EvaluatePolicy

    simulation = GymSimulation(PushtEnv(episode_length=args.episode_length))
    if args.policy:
        from rlctl.api import load_policy  # type: ignore[attr-defined]

        policy = load_policy(args.policy)
    else:
        from rlctl.adapters.sim.random_policy import RandomPolicy

        spec = simulation.spec()
        policy = RandomPolicy(spec.action_low, spec.action_high, seed=0)
    use_async = {"auto": None, "true": True, "false": False}[args.use_async]
    settings = EvalSettings(
        n_episodes=args.episodes,
        batch_size=args.batch_size,
        use_async_envs=use_async,
        max_episodes_rendered=0,
    )
    use_case = EvaluatePolicy(simulation, policy, SilentProgress())
    started = time.time()
    report = use_case(settings)
    overall = report.to_info()["overall"]
    first_step_at = started + (use_case.first_step_s or 0.0)
    print(
        json.dumps(
            {
                "first_step_at": first_step_at,
                "eval_s": round(overall["eval_s"], 3),
                "batch_size": use_case.plan.batch_size if use_case.plan else None,
                "use_async": use_case.plan.use_async if use_case.plan else None,
                "plan": use_case.plan.reason if use_case.plan else None,
                "n_episodes": overall["n_episodes"],
                "pc_success": overall["pc_success"],
            }
        )
    )


def measure_rlctl(args: argparse.Namespace) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--child", *sys.argv[1:]]
    spawned = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.time() - spawned
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    first_step = result.pop("first_step_at") - spawned
    return {
        "tool": "rlctl",
        "wall_s": round(wall, 3),
        "first_step_s": round(first_step, 3),
        **result,
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
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    for _ in range(args.repeat):
        print(json.dumps(measure_rlctl(args)), flush=True)
    if args.lerobot_eval:
        if not args.policy:
            raise SystemExit("--lerobot-eval needs --policy (the same checkpoint for both tools)")
        print(json.dumps(measure_lerobot(args)), flush=True)


if __name__ == "__main__":
    main()
