"""`rlctl rollout`'s loop with a slow policy: sync against the acting engine (async, RTC).

A virtual SO-101 follower (a Feetech bus served from its own process, as real motors answer
from their own chips), the system clock, `RunRollout` with the base strategy at `--fps`, and
a policy whose chunk takes `--model-ticks` tick periods (numpy work, which lets go of the
interpreter as torch does), or a saved checkpoint (`--checkpoint PATH`: any policy rlctl loads,
e.g. the SmolVLA real-size checkpoint `smolvla_real_size.py` writes). Each inference engine
runs in turn; one JSON line each, then a table side by side:

    late_ticks         ticks that started more than half a period late
    missed_ticks       ticks that never happened (a period of n targets skipped n - 1)
    p50/p95/max_ms     the period between consecutive ticks (goal: p95 within 1 ms of 1/fps)
    held_ticks         ticks the policy drove without a fresh action (the arm held)
    max_jump           the largest change of any joint between consecutive commands (degrees;
                       at chunk boundaries: a stalled sync loop resumes where the motion is
                       now; the smooth motion itself moves 0.52 a tick)
    chunks             chunks computed

The first ticks are left out (both engines wait for the first chunk: nothing to act yet).

Usage:
    uv run python benchmarks/rollout_timing.py [--fps 30 --seconds 10 --model-ticks 10
        --chunk 50 --queue-threshold 20] [--checkpoint PATH --device cpu]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

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


def make_policy(args: argparse.Namespace, engine: str) -> Any:
    if args.checkpoint:
        from rlctl.adapters.policies.loaded_policy import LeRobotPolicyLoader

        loader = LeRobotPolicyLoader()
        model: Any = loader.load(args.checkpoint, device=args.device)
    else:
        model = BusyPolicy(args.model_ticks / args.fps, args.chunk, args.fps)
    if engine == "sync":
        return model
    rtc = RTCConfig(execution_horizon=args.queue_threshold) if engine == "rtc" else None
    return AsyncActing(
        LocalChunks(PolicyService({"local": model})),
        RemotePolicySettings(rtc_config=rtc),
        label="policy",
        queue_threshold=args.queue_threshold,
    )


def measure(args: argparse.Namespace, engine: str, port: str, store: CalibrationFiles) -> dict:
    robot = so_follower(SO101FollowerConfig(port=port, id="bench"), calibration_store=store)
    policy = make_policy(args, engine)
    # As `rlctl rollout` runs it: the loop owns the process (the interpreter hands it the lock
    # within a millisecond).
    report = RunRollout(robot, SystemClock(), policy=policy, owns_process=True)(
        BaseStrategyConfig(),
        RolloutSettings(fps=args.fps, duration_s=args.seconds, return_to_initial_position=False),
    )
    starts = np.asarray(report.timeline.starts)[WARMUP_TICKS:]
    periods = np.diff(starts) * 1e3
    jumps = np.asarray(report.timeline.jumps)[WARMUP_TICKS:]
    period = 1e3 / args.fps
    late = int(np.sum(periods > 1.5 * period))
    # Ticks that never happened: a period of n targets skipped n - 1 of them.
    missed = int(np.sum(np.maximum(np.round(periods / period) - 1, 0)))
    chunks = (
        policy.chunks_received
        if isinstance(policy, AsyncActing)
        else getattr(policy, "calls", None)
    )
    return {
        "engine": engine,
        "fps": args.fps,
        "model_s": round(args.model_ticks / args.fps, 3) if not args.checkpoint else None,
        "ticks": len(starts),
        "late_ticks": late,
        "missed_ticks": missed,
        "p50_ms": round(float(np.percentile(periods, 50)), 2),
        "p95_ms": round(float(np.percentile(periods, 95)), 2),
        "max_ms": round(float(np.max(periods)), 2),
        "held_ticks": report.held_ticks,
        "max_jump": round(float(np.max(jumps)) if len(jumps) else 0.0, 3),
        "chunks": chunks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--model-ticks", type=float, default=10.0)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--queue-threshold", type=int, default=20)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--engines", default="sync,async,rtc")
    args = parser.parse_args()

    FeetechMotorBus.default_timeout_margin_ms = 250.0  # a loaded machine answers late
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
            row = measure(args, engine, port, store)
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        server.terminate()
        server.wait(timeout=10)
    keys = [k for k in rows[0] if k not in ("engine", "fps", "model_s")]
    print(f"\n{'':16}" + "".join(f"{r['engine']:>10}" for r in rows))
    for key in keys:
        print(f"{key:16}" + "".join(f"{r[key]!s:>10}" for r in rows))


if __name__ == "__main__":
    main()
