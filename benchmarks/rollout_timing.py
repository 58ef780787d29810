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
    first_chunk_s      the first tick's wait for the first chunk (every engine waits for it)

With `--phases`, where each of rlctl's ticks spent its time (p50/p95/max ms: the observation
read, the policy's `select_action`, the send, the rest of the tick), and each tick that started
more than 1 ms after its due time put down to its cause: the tick before ran past this one's due
time (`overran`, with the phase that took longest), or the loop was idle at the due time and
woke up late (`woke_late`: the scheduler or another thread holding the interpreter).

The first ticks are left out (both engines wait for the first chunk: nothing to act yet).
Then the issue's check, on the wall clock: with a model slower than a tick, the sync engine
misses ticks, and each asynchronous engine keeps p95 within 1 ms of the period with no tick
without a fresh action (expected only where the chunk outlasts twice the model's delay: one
model computes one chunk at a time, and a chunk is usable from when it comes).

Usage:
    uv run python benchmarks/rollout_timing.py [--fps 30 --seconds 10 --model-ticks 10
        --chunk 50 --queue-threshold 20] [--policy smolvla-real [--work DIR]
        | --checkpoint PATH] [--device cpu] [--engines sync,async,rtc]
        [--lerobot] [--phases]
    # SmolVLA at real size takes ~5 GB (~7 GB with LeRobot's beside it): one such run at a
    # time on a shared machine
    flock /tmp/heavy.lock uv run python benchmarks/rollout_timing.py --policy smolvla-real \
        --seconds 60 --engines sync,rtc --lerobot

`--seconds` is wall time from the first tick (the first chunk's wait included). With
`--lerobot`, LeRobot 0.6.1's `lerobot-rollout` (its Python: `--lerobot-python`) runs after
rlctl's sync and rtc runs, the same way, on the same virtual bus: its SO follower, the same
synthetic cameras, the same policy (the busy stand-in replaces a tiny SmolVLA's chunks), its
`--inference.type=sync|rtc` with the same queue threshold and execution horizon. LeRobot's
motor bus needs `deepdiff`, which its environment may lack: point `LEROBOT_EXTRA_PATH` at a
folder holding it (`uv pip install --target DIR deepdiff`).
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
from rlctl.application.ports.control import RolloutEvent
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
TASK = "pick up the cube"  # what both tools give the policy
FIRST_CHUNK_TIMEOUT_S = 900.0


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
        # A real-size model's first chunk on a loaded CPU takes minutes (the default 30 s
        # stopped the run: "no action from the policy within 30.0 s").
        RemotePolicySettings(rtc_config=rtc, connect_timeout_s=FIRST_CHUNK_TIMEOUT_S),
        label="policy",
        queue_threshold=args.queue_threshold,
    )


class Phases:
    """When each tick read the observation, had its action and had sent it (`--phases`)."""

    def __init__(self, robot: Any, policy: Any) -> None:
        self.marks: list[list[float]] = []
        read, send, act = robot.get_observation, robot.send_action, policy.select_action

        def get_observation() -> Any:
            began = time.perf_counter()
            observation = read()
            self.marks.append([began, time.perf_counter(), np.nan, np.nan])
            return observation

        def select_action(batch: Any) -> Any:
            action = act(batch)
            self.marks[-1][2] = time.perf_counter()
            return action

        def send_action(action: Any) -> Any:
            sent = send(action)
            self.marks[-1][3] = time.perf_counter()
            return sent

        robot.get_observation, robot.send_action = get_observation, send_action
        policy.select_action = select_action

    def summary(self, period_s: float) -> dict:
        """Phase times (ms) of the ticks after the warm-up, and the late ticks by cause. A
        tick's start is its observation read's (the first thing a tick does); a read no action
        followed (the arm's position, taken before the first tick) is no tick."""
        marks = np.asarray(self.marks)
        marks = marks[~np.isnan(marks[:, 2])]
        ticks = len(marks)
        begun = marks[:, 0]
        phases = {
            "observe": marks[:, 1] - marks[:, 0],
            "policy": marks[:, 2] - marks[:, 1],
            "send": marks[:, 3] - marks[:, 2],
            "rest": np.append(marks[1:, 0] - marks[:-1, 3], np.nan),  # bookkeeping + sleep
        }
        due, late = begun[0], {"overran": 0, "woke_late": 0}
        slowest: dict[str, int] = {}
        woke: list[float] = []
        for k in range(1, ticks):
            due += period_s
            lateness = begun[k] - due
            if k > WARMUP_TICKS and lateness > 1e-3:
                if marks[k - 1, 3] > due:  # the last tick was still at work when this was due
                    late["overran"] += 1
                    work = {name: phases[name][k - 1] for name in ("observe", "policy", "send")}
                    name = max(work, key=lambda n: work[n])
                    slowest[name] = slowest.get(name, 0) + 1
                else:
                    late["woke_late"] += 1
                    woke.append(lateness * 1e3)
            if lateness > period_s:  # as the Ticker does: a new schedule from here
                due = begun[k]
        kept = slice(WARMUP_TICKS, ticks - 1)
        out: dict[str, Any] = {}
        for name, values in phases.items():
            v = values[kept] * 1e3
            if name == "rest":
                continue
            out[name] = [round(float(np.percentile(v, q)), 2) for q in (50, 95, 100)]
        return {
            "phases_ms_p50_p95_max": out,
            "late_by_cause": late,
            "overran_in": slowest,
            "woke_late_ms_p50_max": [round(float(np.percentile(woke, q)), 2) for q in (50, 100)]
            if woke
            else None,
        }


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


def _ms(periods: np.ndarray, percentile: float) -> float | None:
    """A percentile of the periods, or None when too few ticks came (a model slower than the
    whole run)."""
    if not len(periods):
        return None
    return round(float(np.percentile(periods, percentile)), 2)


class StopAfter:
    """Esc, pressed `seconds` of wall time after the first tick: every engine runs as long
    (LeRobot's `--duration` is wall time too), however many ticks a stalled sync loop made."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._start: float | None = None

    def poll(self) -> frozenset[RolloutEvent]:
        now = time.perf_counter()
        if self._start is None:
            self._start = now
        return frozenset({RolloutEvent.STOP}) if now - self._start >= self._seconds else frozenset()

    def close(self) -> None:
        pass


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
    phases = Phases(robot, policy) if args.phases else None
    # As `rlctl rollout` runs it: the loop owns the process (the interpreter hands it the lock
    # within a millisecond).
    report = RunRollout(
        robot, SystemClock(), policy=policy, controls=StopAfter(args.seconds), owns_process=True
    )(
        BaseStrategyConfig(),
        RolloutSettings(fps=args.fps, task=TASK, return_to_initial_position=False),
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
    if phases is not None:
        print(
            json.dumps({"engine": engine, **phases.summary(1 / args.fps)}),
            flush=True,
        )
    return {
        "engine": engine,
        "fps": args.fps,
        "model_s": round(args.model_ticks / args.fps, 3) if loaded is None else None,
        "ticks": len(starts),
        "first_chunk_s": round(float(np.diff(report.timeline.starts[:2])[0]), 2)
        if len(report.timeline.starts) > 1
        else None,
        "late_ticks": late,
        "missed_ticks": missed,
        "p50_ms": _ms(periods, 50),
        "p95_ms": _ms(periods, 95),
        "max_ms": _ms(periods, 100),
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
        if row["engine"] in ("sync", "lerobot-sync"):
            verdict = "misses ticks" if row["missed_ticks"] else "misses no tick"
            lines.append(f"check sync: {verdict} ({row['missed_ticks']} missed)")
            continue
        on_time = row["p95_ms"] is not None and abs(row["p95_ms"] - target) <= 1.0
        lines.append(
            f"check {row['engine']}: p95 {row['p95_ms']} ms vs {target:.2f} +- 1 ms: "
            f"{'met' if on_time else 'NOT met'}; ticks without a fresh action "
            f"{row['held_ticks']}: {'met' if row['held_ticks'] == 0 else 'NOT met'}"
        )
    return lines


LEROBOT_CHILD = r"""
import json, sys, time
from pathlib import Path
import numpy as np
import torch

args = json.loads(sys.argv[1])
FPS, CHUNK = args["fps"], args["chunk"]
H, W = 480, 640
checkpoint = Path(args["checkpoint"])
if not (checkpoint / "model.safetensors").is_file():
    # The busy stand-in needs a policy LeRobot can build its rollout on: a SmolVLA on a tiny
    # SmolVLM (random weights), with the real one's features; its chunks are replaced below.
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    features = {"observation.state": PolicyFeature(FeatureType.STATE, (6,))}
    for name in args["cameras"]:
        features[f"observation.images.{name}"] = PolicyFeature(FeatureType.VISUAL, (3, H, W))
    config = SmolVLAConfig(
        vlm_model_name=args["vlm"], load_vlm_weights=False, device="cpu", num_vlm_layers=4,
        resize_imgs_with_padding=(64, 64), chunk_size=CHUNK, n_action_steps=CHUNK,
        input_features=features,
        output_features={"action": PolicyFeature(FeatureType.ACTION, (6,))})
    policy = SmolVLAPolicy(config)
    stats = {k: {"mean": torch.zeros(6), "std": torch.ones(6)}
             for k in ("observation.state", "action")}
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    for part in (policy, pre, post):
        part.save_pretrained(checkpoint)

import lerobot.rollout.context as context
import scservo_sdk.port_handler
from lerobot.scripts import lerobot_rollout

# A loaded machine answers late: LeRobot pings each motor at connect with the SDK's packet
# timeout (2 x 16 ms), and the virtual bus's process may miss it ("motor check failed:
# Missing motor IDs"). The same 250 ms margin rlctl's bus gets in this benchmark.
scservo_sdk.port_handler.LATENCY_TIMER = 125


class SyntheticCamera:
    # rlctl's synthetic camera (a moving gradient), as benchmarks/record_loop.py redoes it.
    def __init__(self):
        x = np.linspace(0, 255, W, dtype=np.float32)
        y = np.linspace(0, 255, H, dtype=np.float32)[:, None]
        self.frame = np.empty((H, W, 3), np.uint8)
        self.frame[..., 0], self.frame[..., 1] = x[None, :], y
        self.frame[..., 2] = (x[None, :] + y) / 2
        self.height, self.width, self.fps, self.is_connected = H, W, FPS, False

    def connect(self, warmup=True):
        self.is_connected = True

    def read_latest(self, max_age_ms=500):
        return self.frame

    async_read = read = read_latest

    def disconnect(self):
        self.is_connected = False


ticks = []  # per tick: [its start (the observation asked), the command sent or None, chunks]
chunks = [0]
make_robot = context.make_robot_from_config


def instrumented_robot(config):
    robot = make_robot(config)
    robot.cameras = {name: SyntheticCamera() for name in args["cameras"]}
    observe, send = robot.get_observation, robot.send_action

    def get_observation():
        ticks.append([time.perf_counter(), None, chunks[0]])
        return observe()

    def send_action(action):
        sent = send(action)
        ticks[-1][1] = [float(sent[k]) for k in sorted(sent)]
        return sent

    robot.get_observation, robot.send_action = get_observation, send_action
    return robot


load = context._load_pretrained_policy


def policy_with_chunks_counted(config):
    policy = load(config)
    compute = policy._get_action_chunk
    busy_s = args["busy_s"]
    work = np.ones((256, 256), np.float32)
    origin = [None]

    def busy(batch, noise=None, **kwargs):
        # rlctl's BusyPolicy: a slow sine in degrees, continuing from its observation.
        observed = time.perf_counter()
        until = observed + busy_s
        while time.perf_counter() < until:
            work @ work
        if origin[0] is None:
            origin[0] = time.perf_counter()
        t = max(0.0, observed - origin[0]) + np.arange(CHUNK, dtype=np.float32) / FPS
        wave = 10.0 * np.sin(2 * np.pi * t / 4.0)
        return torch.from_numpy(np.repeat(wave[None, :, None], 6, axis=2).astype(np.float32))

    def counted(batch, noise=None, **kwargs):
        actions = (busy if busy_s else compute)(batch, noise, **kwargs)
        chunks[0] += 1
        return actions

    policy._get_action_chunk = counted
    return policy


context.make_robot_from_config = instrumented_robot
context._load_pretrained_policy = policy_with_chunks_counted
sys.argv = ["lerobot-rollout", *args["argv"]]
lerobot_rollout.main()
print(json.dumps({"ticks": ticks}))
"""


def run_lerobot(
    args: argparse.Namespace, engine: str, port: str, work: Path, checkpoint: Path | None
) -> dict:
    """LeRobot 0.6.1's `lerobot-rollout` (base strategy) on the same virtual bus, in its own
    Python: its SO follower reads rlctl's calibration file, its cameras are the same synthetic
    gradient; the same figures from its tick times and the commands it sent."""
    from record_loop import serial_module_dir

    shim = work / "lerobot_path"
    if not shim.exists():
        shim.mkdir()
        site = Path(serial_module_dir()).parent
        for pattern in ("scservo_sdk", "serial", "feetech_servo_sdk-*.dist-info", "pyserial-*"):
            for found in site.glob(pattern):
                (shim / found.name).symlink_to(found)
    busy = checkpoint is None
    if busy:
        vlm, checkpoint = work / "tiny_vlm", work / "tiny_smolvla"
        if not (vlm / "config.json").is_file():
            subprocess.run(
                [args.lerobot_python, str(args.bench_dir / "make_tiny_smolvlm.py"), str(vlm)],
                check=True,
                capture_output=True,
            )
    argv = [
        "--strategy.type=base",
        f"--policy.path={checkpoint}",
        "--robot.type=so101_follower",
        f"--robot.port={port}",
        "--robot.id=bench",
        f"--robot.calibration_dir={work / 'calibration' / 'robots' / 'so_follower'}",
        f"--inference.type={engine}",
        f"--fps={args.fps}",
        f"--duration={args.seconds}",
        f"--task={TASK}",
        "--return_to_initial_position=false",
        "--play_sounds=false",
        "--device=cpu",
    ]
    if engine == "rtc":
        argv += [
            f"--inference.queue_threshold={args.queue_threshold}",
            f"--inference.rtc.execution_horizon={args.queue_threshold}",
        ]
    child = {
        "fps": args.fps,
        "chunk": args.chunk,
        "checkpoint": str(checkpoint),
        "vlm": str(work / "tiny_vlm"),
        "cameras": list(SMOLVLA_CAMERAS),
        "busy_s": args.model_ticks / args.fps if busy else 0.0,
        "argv": argv,
    }
    # What LeRobot's environment lacks comes from this one (the Feetech SDK, pyserial);
    # $LEROBOT_EXTRA_PATH may add more (deepdiff, which LeRobot's motor bus requires).
    extra = os.environ.get("LEROBOT_EXTRA_PATH")
    path = os.pathsep.join(filter(None, [str(shim), extra]))
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [args.lerobot_python, "-c", LEROBOT_CHILD, json.dumps(child)],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=900 + 3 * args.seconds,
        check=False,
    )
    if result.returncode != 0:
        return {"engine": f"lerobot-{engine}", "error": result.stderr[-3000:]}
    ticks = json.loads(result.stdout.strip().splitlines()[-1])["ticks"]
    # From the first command on (both wait for the first chunk), less the same warm-up ticks.
    first = next((i for i, tick in enumerate(ticks) if tick[1] is not None), len(ticks))
    # The wait for the first chunk: from the first tick to the tick after the first command
    # (LeRobot's sync loop computes it inside its first tick, after the observation).
    first_s = ticks[first + 1][0] - ticks[0][0] if first + 1 < len(ticks) else None
    ticks = ticks[first + WARMUP_TICKS :]
    starts = np.asarray([t[0] for t in ticks])
    periods = np.diff(starts) * 1e3
    period = 1e3 / args.fps
    sent = [np.asarray(t[1]) if t[1] is not None else None for t in ticks]
    jumps, boundary, last = [], [], None
    for i, command in enumerate(sent):
        if command is None:
            continue
        if last is not None:
            jumps.append(float(np.max(np.abs(command - last))))
            # A new chunk counted within a tick of this one: LeRobot's count moves during the
            # tick that computed it (sync) or in its worker (rtc), not when the queue takes it.
            near = (i - 1, i, i + 1)
            if any(0 < j < len(ticks) and ticks[j][2] != ticks[j - 1][2] for j in near):
                boundary.append(jumps[-1])
        last = command
    return {
        "engine": f"lerobot-{engine}",
        "fps": args.fps,
        "model_s": round(args.model_ticks / args.fps, 3) if busy else None,
        "ticks": len(starts),
        "first_chunk_s": round(first_s, 2) if first_s is not None else None,
        "late_ticks": int(np.sum(periods > 1.5 * period)),
        "missed_ticks": int(np.sum(np.maximum(np.round(periods / period) - 1, 0))),
        "p50_ms": _ms(periods, 50),
        "p95_ms": _ms(periods, 95),
        "max_ms": _ms(periods, 100),
        "held_ticks": sum(1 for command in sent if command is None),
        "max_jump": round(max(jumps), 3) if jumps else 0.0,
        "boundary_jump": round(max(boundary), 3) if boundary else None,
        "chunks": ticks[-1][2] if ticks else 0,
        "chunk_s": None,
    }


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
    parser.add_argument(
        "--lerobot",
        action="store_true",
        help="after each of rlctl's sync and rtc runs, LeRobot's lerobot-rollout with the same",
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="where rlctl's ticks spent their time, and why a tick started late",
    )
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
            if args.lerobot and engine in ("sync", "rtc"):
                checkpoint = None
                if args.policy == "smolvla-real":
                    checkpoint = args.work / "checkpoint"
                elif args.checkpoint:
                    checkpoint = Path(args.checkpoint)
                theirs = run_lerobot(args, engine, port, work, checkpoint)
                theirs["load_avg"] = round(os.getloadavg()[0], 2)
                print(json.dumps(theirs), flush=True)
                if "error" not in theirs:
                    rows.append(theirs)
    finally:
        server.terminate()
        server.wait(timeout=10)
    keys = [k for k in rows[0] if k not in ("engine", "fps", "model_s")]
    print(f"\n{'':16}" + "".join(f"{r['engine']:>14}" for r in rows))
    for key in keys:
        print(f"{key:16}" + "".join(f"{r[key]!s:>14}" for r in rows))
    print()
    for line in check(rows, args):
        print(line)


if __name__ == "__main__":
    main()
