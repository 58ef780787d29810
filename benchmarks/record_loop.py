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
wait on encoding?), how long the encoders still ran after the last episode, and where the time
of a tick goes: p50/p95/max of each call the loop makes (bus reads and writes, camera reads,
`add_frame`, `save_episode`, how late each sleep woke up, and the commits on the writer's
thread), with the five slowest ticks broken down the same way.

With `--lerobot-python PATH` (an interpreter with lerobot==0.6.1), LeRobot's own `record_loop`
then records the same episodes on the same virtual buses, with the same synthetic cameras and
`LeRobotDataset` (its defaults: PNG frames by writer threads, encoding at `save_episode`, or
`--lerobot-streaming` for its streaming encoder), and a second JSON line gives its figures.
LeRobot finds the Feetech SDK and pyserial of this environment through PYTHONPATH when its own
environment lacks them.

With `--display`, the live display of `--display_data=true` runs too (rerun, into an .rrd file,
as on a machine without a screen): `display.log_frame` is timed as a phase of the tick, and the
frames the display dropped and showed are printed.

Usage:
    python benchmarks/record_loop.py [--episodes 3 --episode-s 20 --fps 30 --cams 2 --hw 480x640]
        [--encoder-niceness 10] [--display] [--lerobot-python /tmp/lerobot-anchor/bin/python
        [--lerobot-streaming]]
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
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
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


class PhaseTimes:
    """When each call a tick makes began and how long it took; how late each sleep woke up."""

    def __init__(self) -> None:
        self.samples: dict[str, list[tuple[float, float]]] = {}

    def wrap(self, name: str, call: Any) -> Any:
        samples = self.samples.setdefault(name, [])

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                samples.append((started, time.perf_counter() - started))

        return timed

    def summary(self) -> dict[str, dict[str, float]]:
        """p50 / p95 / max in ms per phase (the sleep: its overshoot past the deadline)."""
        summary = {}
        for name, samples in self.samples.items():
            if samples:
                array = np.asarray([duration for _, duration in samples]) * 1e3
                summary[name] = {
                    "p50": round(float(np.percentile(array, 50)), 3),
                    "p95": round(float(np.percentile(array, 95)), 3),
                    "max": round(float(array.max()), 3),
                }
        return summary

    def slowest_ticks(self, ticks: list[tuple[float, int, dict[str, int]]], n: int) -> list[dict]:
        """The `n` longest periods, each with the time its phases took within it (ms)."""
        periods = [
            (b[0] - a[0], a[0], b[0], a[1]) for a, b in itertools.pairwise(ticks) if a[1] == b[1]
        ]
        first = ticks[0][0] if ticks else 0.0
        slowest = []
        for period, begin, end, episode in sorted(periods, reverse=True)[:n]:
            within: dict[str, float] = {}
            for name, samples in self.samples.items():
                spent = sum(d for t, d in samples if begin <= t < end)
                if spent:
                    within[name] = round(spent * 1e3, 2)
            slowest.append(
                {
                    "period_ms": round(period * 1e3, 2),
                    "episode": episode,
                    "at_s": round(begin - first, 2),
                    "phases_ms": within,
                }
            )
        return slowest


class ProfiledClock(SystemClock):
    def __init__(self, phases: PhaseTimes) -> None:
        super().__init__()
        self._woke_late = phases.samples.setdefault("sleep_overshoot", [])

    def sleep_until(self, deadline: float) -> None:
        super().sleep_until(deadline)
        self._woke_late.append((deadline, time.perf_counter() - deadline))


class _TimedCommits:
    def __init__(self, files: Any, phases: PhaseTimes) -> None:
        self._files = files
        self.commit = phases.wrap("commit (thread)", files.commit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._files, name)


class ProfiledWriter:
    """The writer, with its sessions' `add_frame` and `save_episode` timed."""

    def __init__(self, writer: Any, phases: PhaseTimes) -> None:
        self._writer = writer
        self._phases = phases

    def create(self, *args: Any, **kwargs: Any) -> Any:
        session = self._writer.create(*args, **kwargs)
        session.add_frame = self._phases.wrap("add_frame", session.add_frame)
        session.save_episode = self._phases.wrap("save_episode", session.save_episode)
        # The committer's thread shares the interpreter lock with the loop.
        committer = session._committer
        committer._files = _TimedCommits(committer.files, self._phases)
        return session


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


LEROBOT_CHILD = r"""
import json, os, sys, threading, time
from pathlib import Path
import numpy as np
from lerobot.datasets import LeRobotDataset
from lerobot.processor import make_default_processors
from lerobot.robots.so_follower import SOFollower, SOFollowerRobotConfig
from lerobot.scripts.lerobot_record import record_loop
from lerobot.teleoperators.so_leader import SOLeader, SOLeaderTeleopConfig
from lerobot.utils.feature_utils import hw_to_dataset_features

args = json.loads(sys.argv[1])
H, W, FPS = args["height"], args["width"], args["fps"]


class SyntheticCamera:
    # rlctl's synthetic camera, redone for LeRobot: the same moving gradient on a thread.
    def __init__(self):
        x = np.linspace(0, 255, W, dtype=np.float32)
        y = np.linspace(0, 255, H, dtype=np.float32)[:, None]
        self.base = np.empty((H, W, 3), np.uint8)
        self.base[..., 0], self.base[..., 1] = x[None, :], y
        self.base[..., 2] = (x[None, :] + y) / 2
        self.height, self.width, self.fps = H, W, FPS
        self.frame, self.k, self.stop = None, 0, threading.Event()

    is_connected = property(lambda self: self.frame is not None and not self.stop.is_set())

    def connect(self):
        threading.Thread(target=self.run, daemon=True).start()
        while self.frame is None:
            time.sleep(0.005)

    def run(self):
        due = time.perf_counter()
        while not self.stop.is_set():
            due += 1 / FPS
            time.sleep(max(0.0, due - time.perf_counter()))
            frame = np.roll(self.base, (self.k * 4) % W, axis=1)
            frame[0, :3, 0] = [(self.k >> 16) & 255, (self.k >> 8) & 255, self.k & 255]
            self.frame, self.k = frame, self.k + 1

    def read_latest(self, max_age_ms=500):
        return self.frame

    def disconnect(self):
        self.stop.set()


calibration = Path(args["calibration"])
robot = SOFollower(SOFollowerRobotConfig(
    port=args["follower"], id="bench", calibration_dir=calibration / "robots" / "so_follower"))
robot.cameras = {f"cam{i}": SyntheticCamera() for i in range(args["cams"])}
leader = SOLeader(SOLeaderTeleopConfig(
    port=args["leader"], id="bench", calibration_dir=calibration / "teleoperators" / "so_leader"))
ticks = []
episode = [-1]
observe = robot.get_observation


def timed_observation():
    asked = time.perf_counter()
    observation = observe()
    numbers = {k: int(v[0, 0, 0]) * 65536 + int(v[0, 1, 0]) * 256 + int(v[0, 2, 0])
               for k, v in observation.items() if isinstance(v, np.ndarray) and v.ndim == 3}
    ticks.append((asked, episode[0], numbers))
    return observation


robot.get_observation = timed_observation
features = {**hw_to_dataset_features(robot.action_features, "action"),
            **hw_to_dataset_features(robot.observation_features, "observation")}
dataset = LeRobotDataset.create(
    "bench/lerobot", FPS, root=args["root"], robot_type=robot.name, features=features,
    use_videos=True, image_writer_threads=4 * args["cams"],
    streaming_encoding=args["streaming"], encoder_threads=None)
leader.connect()
robot.connect()
events = {"exit_early": False, "rerecord_episode": False, "stop_recording": False}
teleop_p, robot_p, obs_p = make_default_processors()
saves = []
started = time.perf_counter()
for ep in range(args["episodes"]):
    episode[0] = ep
    record_loop(robot=robot, events=events, fps=FPS, teleop_action_processor=teleop_p,
                robot_action_processor=robot_p, robot_observation_processor=obs_p,
                dataset=dataset, teleop=leader, control_time_s=args["episode_s"],
                single_task="benchmark")
    t = time.perf_counter()
    dataset.save_episode()
    saves.append(time.perf_counter() - t)
t = time.perf_counter()
dataset.finalize()
finalize_s = time.perf_counter() - t
wall_s = time.perf_counter() - started
robot.disconnect()
leader.disconnect()
# SVT-AV1, encoding on this thread at save_episode, switches it to SCHED_FIFO where it may (root).
policy = {0: "normal", 1: "fifo", 2: "rr"}.get(os.sched_getscheduler(0), "other")
print(json.dumps({"ticks": ticks, "saves": saves, "finalize_s": finalize_s, "wall_s": wall_s,
                  "frames": dataset.meta.total_frames, "loop_thread_policy": policy}))
"""


def run_lerobot(python: str, work: Path, ports: list[str], args: argparse.Namespace) -> dict:
    """LeRobot's record loop on the same buses; the same figures, from its tick times."""
    shim = work / "lerobot_path"
    shim.mkdir(exist_ok=True)
    site = Path(serial_module_dir()).parent
    for pattern in ("scservo_sdk", "serial", "feetech_servo_sdk-*.dist-info", "pyserial-*"):
        for found in site.glob(pattern):
            (shim / found.name).symlink_to(found)
    height, width = (int(v) for v in args.hw.split("x"))
    child_args = {
        "follower": ports[0],
        "leader": ports[1],
        "calibration": str(work / "calibration"),
        "root": str(work / "lerobot_dataset"),
        "height": height,
        "width": width,
        "fps": args.fps,
        "cams": args.cams,
        "episodes": args.episodes,
        "episode_s": args.episode_s,
        "streaming": args.lerobot_streaming,
    }
    # What LeRobot's environment lacks comes from this one; PYTHONPATH may add more (deepdiff).
    extra = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(shim), extra]))}
    result = subprocess.run(
        [python, "-c", LEROBOT_CHILD, json.dumps(child_args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600 + 3 * args.episodes * args.episode_s,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"LeRobot's run failed:\n{result.stderr[-3000:]}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    ticks = [(t, ep, numbers) for t, ep, numbers in data["ticks"]]
    periods = [b[0] - a[0] for a, b in itertools.pairwise(ticks) if a[1] == b[1]]
    target = 1 / args.fps
    values = np.asarray(periods)
    return {
        "system": "lerobot " + ("streaming encoding" if args.lerobot_streaming else "defaults"),
        "frames": data["frames"],
        "loop_thread_policy_at_end": data["loop_thread_policy"],
        "period_p50_ms": round(float(np.percentile(values, 50)) * 1e3, 3),
        "period_p95_ms": round(float(np.percentile(values, 95)) * 1e3, 3),
        "period_max_ms": round(float(values.max()) * 1e3, 3),
        "p95_within_1ms": abs(float(np.percentile(values, 95)) - target) <= 1e-3,
        "late_ticks": int(np.sum(values > 1.5 * target)),
        "dropped_frames": args.episodes * round(args.episode_s * args.fps) - data["frames"],
        **camera_gaps(ticks),
        "max_save_episode_ms": round(max(data["saves"]) * 1e3, 2),
        **{
            k: round(v, 3) if isinstance(v, float) else v
            for k, v in episode_starts(ticks, target).items()
        },
        "encoding_after_last_episode_s": round(data["finalize_s"], 2),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "wall_s": round(data["wall_s"], 1),
    }


def serial_module_dir() -> str:
    import scservo_sdk

    return str(Path(scservo_sdk.__file__).parent)


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
    parser.add_argument(
        "--encoder-niceness",
        type=int,
        default=WriterOptions().encoder_niceness,
        help="how far below the recording the encoder processes run (0: the same priority)",
    )
    parser.add_argument(
        "--display", action="store_true", help="with the live display (rerun, to an .rrd file)"
    )
    parser.add_argument("--lerobot-python", default=None, help="also run LeRobot's record loop")
    parser.add_argument("--lerobot-streaming", action="store_true")
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
        phases = PhaseTimes()
        arm = robot._robot.arm
        arm.positions = phases.wrap("follower_read", arm.positions)
        arm.write_goals = phases.wrap("follower_write", arm.write_goals)
        for name, camera in cameras.items():
            camera.read_latest = phases.wrap(f"{name}_read", camera.read_latest)
        robot.get_observation = phases.wrap("observe", robot.get_observation)
        leader.get_action = phases.wrap("leader_read", leader.get_action)
        root = args.keep or work / "dataset"
        display = None
        if args.display:
            from rlctl.adapters.display.rerun_display import RerunDisplay
            from rlctl.adapters.display.settings import DisplaySettings

            display = RerunDisplay(DisplaySettings(mode="file", rrd=str(work / "display.rrd")))
            display.log_frame = phases.wrap("display_log_frame", display.log_frame)  # type: ignore[method-assign]
        use_case = RecordEpisodes(
            ProfiledWriter(
                LeRobotV3Writer(options=WriterOptions(encoder_niceness=args.encoder_niceness)),
                phases,
            ),  # type: ignore[arg-type]
            robot,
            ProfiledClock(phases),
            NoControls(),
            teleop=leader,  # type: ignore[arg-type]
            owns_process=True,  # as `rlctl record`: the loop tunes the interpreter
            display=display,
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
        load_avg_1m = os.getloadavg()[0]  # this run's, before LeRobot's
        lerobot = (
            run_lerobot(args.lerobot_python, work, [port for _, port in servers], args)
            if args.lerobot_python
            else None
        )
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=10)
    timing = report.timing
    expected = args.episodes * round(args.episode_s * args.fps)
    result = {
        "system": "rlctl",
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
        "encoder_niceness": args.encoder_niceness,
        **(
            {"display_shown": display.shown, "display_dropped": display.dropped}
            if display is not None
            else {}
        ),
        "phases_ms": phases.summary(),
        "slowest_ticks": phases.slowest_ticks(robot.ticks, 5),
        "bus_niceness": bus_niceness,
        "load_avg_1m": round(load_avg_1m, 2),
        "wall_s": round(wall_s, 1),
    }
    print(json.dumps(result))
    if lerobot is not None:
        print(json.dumps(lerobot))
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
