"""How well `RecordEpisodes` keeps its rate on a virtual SO-101 with two cameras.

A follower and a leader arm, each a virtual Feetech bus served from its own process (so the bus
threads do not share the recorder's GIL, as real motors would not), two synthetic 480x640
cameras at the loop's rate, the LeRobot v3.0 writer encoding AV1 in the background, the system
clock. Three 20 s episodes at 30 fps with no reset phase between them, the strictest case for
"the next episode does not wait for encoding".

Printed, one JSON line: the loop period (p50, p95, max; goal: p95 within 1 ms of 1/fps), ticks
more than half a period late, dropped frames (frames the episodes should hold but do not) and
camera frames skipped or repeated between consecutive stored frames, the longest
`save_episode`, the first ticks of each later episode against the rest (did the next episode
wait on encoding?), and how long the encoders still ran after the last episode.

Usage:
    python benchmarks/record_loop.py [--episodes 3 --episode-s 20 --fps 30 --cams 2 --hw 480x640]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlctl.adapters.clock.system import SystemClock
from rlctl.adapters.control.terminal import NoControls
from rlctl.adapters.memory.camera import SyntheticCamera, frame_number
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import SO101FollowerConfig
from rlctl.adapters.robots.so_follower import SO_JOINTS, so_follower
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
from rlctl.adapters.teleop.config import SO101LeaderConfig
from rlctl.adapters.teleop.so_leader import so_leader
from rlctl.application.ports.robot import CalibrationKey
from rlctl.application.use_cases.record_episodes import (
    DatasetTarget,
    RecordEpisodes,
    RecordSettings,
)
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.video import VideoEncoding

BUS_ARGS = ("--family", "feetech", "--model", "sts3215", "--ids", "1-6")
# Ticks at the start of an episode compared with the rest (encoder start-up would show there).
EPISODE_START_TICKS = 30


def serve_bus(priority: int) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rlctl.adapters.motors.virtual_bus", *BUS_ARGS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = process.stdout.readline().strip()
    if priority:
        # Real motors answer from their own chips: a server starved of CPU by the encoders
        # would measure this machine's load, not the loop. Raising it needs privileges.
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, process.pid, priority)
    return process, port


class AuditedRobot:
    """Forwards to the robot; notes each observation's time and camera frame numbers."""

    def __init__(self, robot: Any) -> None:
        self._robot = robot
        self.ticks: list[tuple[float, int, dict[str, int]]] = []
        self.episode = -1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._robot, name)

    def reset(self) -> None:
        self.episode += 1
        self._robot.reset()

    def get_observation(self) -> dict[str, Any]:
        asked = time.perf_counter()  # right after the tick began: the tick's start, near enough
        observation = self._robot.get_observation()
        numbers = {
            key: frame_number(value)
            for key, value in observation.items()
            if key.startswith("observation.images.")
        }
        self.ticks.append((asked, self.episode, numbers))
        return observation


def camera_gaps(ticks: list[tuple[float, int, dict[str, int]]]) -> dict[str, int]:
    skipped = repeated = 0
    for (_, ep_a, a), (_, ep_b, b) in itertools.pairwise(ticks):
        if ep_a != ep_b:
            continue
        for key, number in b.items():
            step = number - a[key]
            skipped += max(0, step - 1)
            repeated += int(step == 0)
    return {"camera_frames_skipped": skipped, "camera_frames_repeated": repeated}


def episode_starts(ticks: list[tuple[float, int, dict[str, int]]], period: float) -> dict:
    """p95 of the periods in the first ticks of episodes 2.. against all later periods."""
    start, rest = [], []
    by_episode: dict[int, list[float]] = {}
    for t, ep, _ in ticks:
        by_episode.setdefault(ep, []).append(t)
    for ep, times in by_episode.items():
        periods = np.diff(times)
        if ep > 0:
            start.extend(periods[:EPISODE_START_TICKS])
        rest.extend(periods[EPISODE_START_TICKS:])
    p95 = lambda values: float(np.percentile(values, 95)) * 1e3 if values else None  # noqa: E731
    return {
        "next_episode_start_p95_ms": p95(start),
        "steady_p95_ms": p95(rest),
        # Waiting on the previous episode's encoding would make those first ticks the slow ones.
        "next_episode_waited": bool(start) and bool(rest) and p95(start) > p95(rest) + 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--episode-s", type=float, default=20.0)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--cams", type=int, default=2)
    parser.add_argument("--hw", default="480x640")
    parser.add_argument("--vcodec", default="libsvtav1", help="libsvtav1 (LeRobot's), h264, hevc")
    parser.add_argument("--preset", default=None, help="encoder preset (default: LeRobot's)")
    parser.add_argument("--keep", type=Path, default=None, help="write the dataset here")
    parser.add_argument(
        "--bus-priority",
        type=int,
        default=-10,
        help="niceness of the virtual bus servers (negative: ahead of the encoders; 0: as is)",
    )
    args = parser.parse_args()
    height, width = (int(v) for v in args.hw.split("x"))

    # A virtual bus answers late when this machine is loaded; a lost reply would end the run
    # rather than show as a slow tick. (Real motors answer within a millisecond.)
    FeetechMotorBus.default_timeout_margin_ms = 250.0
    work = Path(tempfile.mkdtemp(prefix="record_loop_"))
    servers = [serve_bus(args.bus_priority), serve_bus(args.bus_priority)]
    bus_niceness = [os.getpriority(os.PRIO_PROCESS, p.pid) for p, _ in servers]
    try:
        store = CalibrationFiles(work / "calibration")
        full_range = Calibration(
            {m: MotorCalibration(i, 0, 0, 0, 4095) for i, m in enumerate(SO_JOINTS, start=1)}
        )
        store.save(CalibrationKey("robots", "so_follower", "bench"), full_range)
        store.save(CalibrationKey("teleoperators", "so_leader", "bench"), full_range)
        cameras = {
            f"cam{i}": SyntheticCamera(width, height, fps=args.fps) for i in range(args.cams)
        }
        sizes = {name: {"type": "synthetic", "width": width, "height": height} for name in cameras}
        robot = AuditedRobot(
            so_follower(
                SO101FollowerConfig(port=servers[0][1], id="bench", cameras=_cameras(sizes)),
                calibration_store=store,
                cameras=cameras,
            )
        )
        leader = so_leader(
            SO101LeaderConfig(port=servers[1][1], id="bench"), calibration_store=store
        )
        root = args.keep or work / "dataset"
        use_case = RecordEpisodes(
            LeRobotV3Writer(),
            robot,
            SystemClock(),
            NoControls(),
            teleop=leader,  # type: ignore[arg-type]
        )
        started = time.perf_counter()
        report = use_case(
            DatasetTarget(root=root, encoding=_encoding(args.vcodec, args.preset)),
            RecordSettings(
                fps=args.fps,
                num_episodes=args.episodes,
                episode_time_s=args.episode_s,
                reset_time_s=0,
                single_task="benchmark",
            ),
        )
        wall_s = time.perf_counter() - started
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=10)
    timing = report.timing
    expected = args.episodes * round(args.episode_s * args.fps)
    result = {
        "episodes": len(report.saved_episodes),
        "frames": report.frames,
        "fps": args.fps,
        "cameras": f"{args.cams}x{height}x{width}",
        "vcodec": args.vcodec + (f" preset {args.preset}" if args.preset else ""),
        "period_target_ms": round(timing.target_s * 1e3, 3),
        "period_p50_ms": round(timing.p50_s * 1e3, 3),
        "period_p95_ms": round(timing.p95_s * 1e3, 3),
        "period_max_ms": round(timing.max_s * 1e3, 3),
        "p95_within_1ms": abs(timing.p95_s - timing.target_s) <= 1e-3,
        "late_ticks": timing.late_ticks,
        "dropped_frames": expected - report.frames,
        **camera_gaps(robot.ticks),
        "max_save_episode_ms": round(report.max_save_s * 1e3, 2),
        **{
            k: round(v, 3) if isinstance(v, float) else v
            for k, v in episode_starts(robot.ticks, timing.target_s).items()
        },
        "encoding_after_last_episode_s": round(report.finalize_s, 2),
        "bus_niceness": bus_niceness,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "wall_s": round(wall_s, 1),
    }
    print(json.dumps(result))
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


def _encoding(codec: str, preset: str | None) -> VideoEncoding:
    if preset is None:
        return VideoEncoding(codec=codec)
    return VideoEncoding(codec=codec, preset=preset)


def _cameras(sizes: dict[str, dict]) -> dict:
    from rlctl.adapters.cameras.config import CameraConfig
    from rlctl.domain.config import structure

    return structure(sizes, dict[str, CameraConfig])


if __name__ == "__main__":
    main()
