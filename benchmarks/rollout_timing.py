"""`rlctl rollout`'s loop with a slow policy: sync against the acting engine (async, RTC).

A virtual SO-101 follower (a Feetech bus served from its own process, as real motors answer
from their own chips), the system clock, `RunRollout` with the base strategy at `--fps`, and
a policy whose chunk takes `--model-ticks` tick periods (`--policy busy`: numpy work, which
lets go of the interpreter as torch does), SmolVLA at its real size with random weights
(`--policy smolvla-real`: the checkpoint `smolvla_real_size.py` builds with LeRobot's Python in
`--work`, reused when there; two synthetic 640x480 cameras, `top` and `wrist`, on the arm), or a
saved checkpoint (`--checkpoint PATH`: any policy rlctl loads). The model is loaded once; each
inference engine runs in turn with it; one JSON line each, then a table side by side:

    late_ticks         ticks that started more than half a period late
    missed_ticks       ticks that never happened (a period of n targets skipped n - 1)
    p50/p95/max_ms     the period between consecutive ticks (goal: p95 within 1 ms of 1/fps)
    held_ticks         ticks the policy drove without a fresh action (the arm held)
    max_jump           the largest change of any joint between consecutive commands (degrees;
                       the busy policy's smooth motion itself moves 0.52 a tick)
    boundary_jump      the same, at chunk boundaries only (the first command from a new chunk:
                       a stalled sync loop resumes where the motion is now)
    chunks             chunks computed (sync: the ticks that computed one)
    chunk_s            the median seconds a chunk took (the model, in its worker or the tick)

The first ticks are left out (both engines wait for the first chunk: nothing to act yet).
Then the issue's check, on the wall clock: with a model slower than a tick, the sync engine
misses ticks, and each asynchronous engine keeps p95 within 1 ms of the period with no tick
without a fresh action (expected only where the chunk outlasts twice the model's delay: one
model computes one chunk at a time, and a chunk is usable from when it comes).

Usage:
    uv run python benchmarks/rollout_timing.py [--fps 30 --seconds 10 --model-ticks 10
        --chunk 50 --queue-threshold 20] [--policy smolvla-real [--work DIR]
        | --checkpoint PATH] [--device cpu] [--engines sync,async,rtc]
    # SmolVLA at real size takes ~5 GB: one such run at a time on a shared machine
    flock /tmp/heavy.lock uv run python benchmarks/rollout_timing.py --policy smolvla-real \
        --seconds 30 --engines sync,rtc
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from real_size import host_line

from rlctl.adapters.cameras.config import SyntheticCameraConfig
from rlctl.adapters.clock.system import SystemClock
from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import SO101FollowerConfig
from rlctl.adapters.robots.so_follower import SO_JOINTS, so_follower
from rlctl.application.acting_engine import AsyncActing, LocalChunks
from rlctl.application.ports.robot import CalibrationKey
from rlctl.application.use_cases.run_rollout import RolloutSettings, RunRollout
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import RemotePolicySettings
from rlctl.domain.rollout import BaseStrategyConfig

BUS_ARGS = ("--family", "feetech", "--model", "sts3215", "--ids", "1-6")
WARMUP_TICKS = 3
DEFAULT_LEROBOT = "/tmp/lerobot-anchor/bin/python"
DEFAULT_BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "bench"
# The cameras SmolVLA's real-size checkpoint reads (lerobot_smolvla_bench.py's features).
SMOLVLA_CAMERAS = ("top", "wrist")


class BusyPolicy(ScriptedPolicy):
    """A chunk of a slow sine in degrees around the arm's middle, after `seconds` of work."""

    def __init__(self, seconds: float, chunk: int, fps: int) -> None:
        work = np.ones((256, 256), np.float32)
        self.calls = 0
        origin = 0.0

        def chunker(batch: Any) -> np.ndarray:
            # The chunk continues the motion from when its observation was taken (about now),
            # as a trained policy's would: a late chunk's first actions are for past ticks.
            # The motion starts when the first chunk is in (both engines wait for that one).
            nonlocal origin
            observed = time.perf_counter()
            until = observed + seconds
            while time.perf_counter() < until:
                work @ work
            if self.calls == 0:
                origin = time.perf_counter()
            self.calls += 1
            t = max(0.0, observed - origin) + np.arange(chunk, dtype=np.float32) / fps
            wave = 10.0 * np.sin(2 * np.pi * t / 4.0)
            return np.repeat(wave[None, :, None], len(SO_JOINTS), axis=2)

        super().__init__(len(SO_JOINTS), chunk_size=chunk, chunker=chunker)


def serve_bus() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rlctl.adapters.motors.virtual_bus", *BUS_ARGS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def load_model(args: argparse.Namespace) -> Any:
    """The model every engine drives in turn (loaded once), or None for the busy stand-in."""
    path = args.checkpoint
    if args.policy == "smolvla-real":
        from smolvla_real_size import prepare

        args.work = args.work.resolve()
        args.work.mkdir(parents=True, exist_ok=True)
        _vlm, checkpoint = prepare(args)
        path = str(checkpoint)
    if not path:
        return None
    from rlctl.adapters.policies.loaded_policy import LeRobotPolicyLoader

    return LeRobotPolicyLoader().load(path, device=args.device)


def make_policy(args: argparse.Namespace, engine: str, loaded: Any) -> Any:
    model = (
        loaded
        if loaded is not None
        else BusyPolicy(args.model_ticks / args.fps, args.chunk, args.fps)
    )
    if engine == "sync":
        return model
    rtc = RTCConfig(execution_horizon=args.queue_threshold) if engine == "rtc" else None
    return AsyncActing(
        LocalChunks(PolicyService({"local": model})),
        RemotePolicySettings(rtc_config=rtc),
        label="policy",
        queue_threshold=args.queue_threshold,
    )


class Boundaries:
    """Which ticks acted the first command of a new chunk: the engine's count of chunks moved
    since the last tick, or (sync) the tick that computed one (it took over half a period in
    `select_action`). Installed on the policy object, which RunRollout calls once a tick."""

    def __init__(self, policy: Any, period_s: float) -> None:
        self.ticks: list[bool] = []
        self.chunk_s: list[float] = []
        inner = policy.select_action
        seen = [0]

        def select_action(batch: Any) -> Any:
            started = time.perf_counter()
            action = inner(batch)
            spent = time.perf_counter() - started
            if isinstance(policy, AsyncActing):
                self.ticks.append(policy.chunks_received != seen[0])
                seen[0] = policy.chunks_received
            else:
                computed = spent > period_s / 2
                self.ticks.append(computed)
                if computed:
                    self.chunk_s.append(spent)
            return action

        policy.select_action = select_action


def measure(
    args: argparse.Namespace, engine: str, port: str, store: CalibrationFiles, loaded: Any
) -> dict:
    cameras = (
        {name: SyntheticCameraConfig() for name in SMOLVLA_CAMERAS}
        if args.policy == "smolvla-real"
        else {}
    )
    config = SO101FollowerConfig(port=port, id="bench", cameras=cameras)
    robot = so_follower(config, calibration_store=store)
    policy = make_policy(args, engine, loaded)
    if loaded is not None:
        loaded.reset()
    boundaries = Boundaries(policy, 1.0 / args.fps)
    # As `rlctl rollout` runs it: the loop owns the process (the interpreter hands it the lock
    # within a millisecond).
    report = RunRollout(robot, SystemClock(), policy=policy, owns_process=True)(
        BaseStrategyConfig(),
        RolloutSettings(fps=args.fps, duration_s=args.seconds, return_to_initial_position=False),
    )
    starts = np.asarray(report.timeline.starts)[WARMUP_TICKS:]
    periods = np.diff(starts) * 1e3
    jumps = np.asarray(report.timeline.jumps)[WARMUP_TICKS:]
    at_boundary = np.asarray(boundaries.ticks[WARMUP_TICKS : len(report.timeline.jumps)], bool)
    boundary_jumps = jumps[: len(at_boundary)][at_boundary]
    fresh = np.asarray(report.timeline.fresh)[WARMUP_TICKS:]
    period = 1e3 / args.fps
    late = int(np.sum(periods > 1.5 * period))
    # Ticks that never happened: a period of n targets skipped n - 1 of them.
    missed = int(np.sum(np.maximum(np.round(periods / period) - 1, 0)))
    if isinstance(policy, AsyncActing):
        chunks = policy.chunks_received
        chunk_s = policy.round_trips_s
    else:
        chunks = int(np.sum(boundaries.ticks))
        chunk_s = boundaries.chunk_s
    return {
        "engine": engine,
        "fps": args.fps,
        "model_s": round(args.model_ticks / args.fps, 3) if loaded is None else None,
        "ticks": len(starts),
        "late_ticks": late,
        "missed_ticks": missed,
        "p50_ms": round(float(np.percentile(periods, 50)), 2),
        "p95_ms": round(float(np.percentile(periods, 95)), 2),
        "max_ms": round(float(np.max(periods)), 2),
        "held_ticks": int(np.sum(~fresh)),
        "max_jump": round(float(np.max(jumps)) if len(jumps) else 0.0, 3),
        "boundary_jump": round(float(np.max(boundary_jumps)), 3) if len(boundary_jumps) else None,
        "chunks": chunks,
        "chunk_s": round(float(np.median(chunk_s)), 3) if len(chunk_s) else None,
    }


def check(rows: list[dict], args: argparse.Namespace) -> list[str]:
    """The issue's check, on the wall clock, for each engine measured."""
    target = 1e3 / args.fps
    lines = []
    for row in rows:
        if row["engine"] == "sync":
            verdict = "misses ticks" if row["missed_ticks"] else "misses no tick"
            lines.append(f"check sync: {verdict} ({row['missed_ticks']} missed)")
            continue
        on_time = abs(row["p95_ms"] - target) <= 1.0
        lines.append(
            f"check {row['engine']}: p95 {row['p95_ms']} ms vs {target:.2f} +- 1 ms: "
            f"{'met' if on_time else 'NOT met'}; ticks without a fresh action "
            f"{row['held_ticks']}: {'met' if row['held_ticks'] == 0 else 'NOT met'}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--model-ticks", type=float, default=10.0)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--queue-threshold", type=int, default=20)
    parser.add_argument("--policy", choices=("busy", "smolvla-real"), default="busy")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--work", type=Path, default=Path("/tmp/smolvla_real_size"))
    parser.add_argument("--lerobot-python", default=DEFAULT_LEROBOT)
    parser.add_argument("--bench-dir", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--engines", default="sync,async,rtc")
    args = parser.parse_args()

    FeetechMotorBus.default_timeout_margin_ms = 250.0  # a loaded machine answers late
    print(host_line(), flush=True)
    loaded = load_model(args)
    work = Path(tempfile.mkdtemp(prefix="rollout_timing_"))
    server, port = serve_bus()
    try:
        store = CalibrationFiles(work / "calibration")
        full_range = Calibration(
            {m: MotorCalibration(i, 0, 0, 0, 4095) for i, m in enumerate(SO_JOINTS, start=1)}
        )
        store.save(CalibrationKey("robots", "so_follower", "bench"), full_range)
        rows = []
        for engine in args.engines.split(","):
            row = measure(args, engine, port, store, loaded)
            row["load_avg"] = round(os.getloadavg()[0], 2)
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        server.terminate()
        server.wait(timeout=10)
    keys = [k for k in rows[0] if k not in ("engine", "fps", "model_s")]
    print(f"\n{'':16}" + "".join(f"{r['engine']:>10}" for r in rows))
    for key in keys:
        print(f"{key:16}" + "".join(f"{r[key]!s:>10}" for r in rows))
    print()
    for line in check(rows, args):
        print(line)


if __name__ == "__main__":
    main()
