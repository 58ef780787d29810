"""A crash at any moment keeps every committed episode intact, and resume carries on after them.

Three ways of crashing: a simulated crash at each file replacement of a commit (deterministic,
every step covered), SIGKILL of a recording process in the middle of an episode, and SIGKILL at
random moments while episodes are committed back to back.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
from rlctl.domain.errors import DatasetError

SUPPORT_PATH = Path(__file__).with_name("writer_support.py")


def load_support():
    spec = importlib.util.spec_from_file_location("writer_support", SUPPORT_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()

PLAN = support.DatasetPlan(
    fps=30,
    state_dim=3,
    episodes=tuple(tuple(["pick", "place"][ep % 2] for _ in range(8 + ep % 5)) for ep in range(60)),
    image=True,
    video=True,
)


def record(session, plan, episodes: range) -> None:
    for ep in episodes:
        for t in range(plan.lengths[ep]):
            session.add_frame(support.frame(plan, ep, t))
        session.save_episode()


def finish_and_check(root: Path, plan, episodes: int) -> None:
    """Resume, record up to `episodes`, and check the whole dataset."""
    session = LeRobotV3Writer(options=support.fast_options()).resume(root)
    with session:
        record(session, plan, range(session.num_episodes, episodes))
    final = support.attrs.evolve(plan, episodes=plan.episodes[:episodes])
    support.check_dataset(root, final)
    assert LeRobotMetaReader().read_meta(root).total_episodes == episodes
    assert not [p for p in root.rglob(".*") if p.is_file()], "temporary files left behind"


class SimulatedCrash(BaseException):
    """Stops a commit at a chosen file replacement, leaving the files as a crash would."""


@pytest.mark.slow
def test_a_crash_at_any_replacement_keeps_earlier_episodes(tmp_path: Path, monkeypatch) -> None:
    plan = support.attrs.evolve(PLAN, episodes=PLAN.episodes[:4])
    base = tmp_path / "base"
    with LeRobotV3Writer(options=support.fast_options()).create(
        base, fps=plan.fps, features=plan.features()
    ) as session:
        record(session, plan, range(2))

    real_replace = os.replace
    step = 0
    while True:
        root = tmp_path / f"crash-{step}"
        shutil.copytree(base, root)
        session = LeRobotV3Writer(options=support.fast_options()).resume(root)
        calls = 0

        def replace(src, dst, *, crash_at=step):
            nonlocal calls
            if threading.current_thread().name == "rlctl-commit":
                calls += 1
                if calls == crash_at + 1:
                    raise SimulatedCrash(f"crash before replacement {crash_at}")
            return real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)
        record(session, plan, range(2, 3))
        try:
            session.flush()
            crashed = False
        except DatasetError:
            crashed = True
        monkeypatch.setattr(os, "replace", real_replace)
        if crashed:
            with pytest.raises(DatasetError):
                session.finalize()
        else:
            session.finalize()
        committed = support.check_committed(root, plan)
        assert committed == (2 if crashed else 3)
        finish_and_check(root, plan, 4)
        if not crashed:
            break
        step += 1
    assert step >= 5, "a commit replaces the video, data, stats, episodes and info files"


CHILD = """
import importlib.util, sys, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("writer_support", sys.argv[1])
support = importlib.util.module_from_spec(spec)
spec.loader.exec_module(support)
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
sys.path.insert(0, str(Path(sys.argv[1]).parent))
root, flush = Path(sys.argv[2]), sys.argv[3] == "flush"
plan = support.DatasetPlan(**eval(sys.argv[4]))
writer = LeRobotV3Writer()
if root.exists():
    session = writer.resume(root)
else:
    session = writer.create(root, fps=plan.fps, features=plan.features())
for ep in range(session.num_episodes, len(plan.episodes)):
    for t in range(plan.lengths[ep]):
        session.add_frame(support.frame(plan, ep, t))
        time.sleep(0.003)
    session.save_episode()
    if flush:
        session.flush()
    print("saved", ep, flush=True)
session.finalize()
print("done", flush=True)
"""


def _plan_literal(plan) -> str:
    return repr(
        {
            "fps": plan.fps,
            "state_dim": plan.state_dim,
            "episodes": plan.episodes,
            "image": plan.image,
            "video": plan.video,
        }
    )


def start_recording(root: Path, flush: bool) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            str(SUPPORT_PATH),
            str(root),
            "flush" if flush else "no-flush",
            _plan_literal(PLAN),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL the recorder; its encoder processes then see their input end and exit."""
    children = psutil.Process(process.pid).children(recursive=True)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    psutil.wait_procs(children, timeout=10)


@pytest.mark.slow
def test_sigkill_mid_episode_keeps_saved_episodes_and_resume_continues(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    process = start_recording(root, flush=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip() == "saved 2":
            break
    time.sleep(0.01)  # a few frames into episode 3
    kill_tree(process)
    assert support.check_committed(root, PLAN) == 3
    assert LeRobotMetaReader().read_meta(root).total_episodes == 3
    finish_and_check(root, PLAN, 5)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_at_random_moments_never_loses_committed_episodes(tmp_path: Path, seed) -> None:
    root = tmp_path / "ds"
    process = start_recording(root, flush=False)
    assert process.stdout is not None
    process.stdout.readline()  # recording runs: the first episode is saved (maybe not committed)
    time.sleep(random.Random(seed).uniform(0.0, 1.5))
    kill_tree(process)
    committed = support.check_committed(root, PLAN)
    # The child may have died in the middle of a commit; resume settles it either way.
    finish_and_check(root, PLAN, committed + 2)


def test_resume_appends_to_a_dataset_lerobot_wrote(tmp_path: Path, fixtures_dir: Path) -> None:
    root = tmp_path / "ds"
    shutil.copytree(fixtures_dir / "sim_video", root)
    before = support.data_table(root)
    plan = support.DatasetPlan(fps=10, state_dim=6, episodes=(("pick the cube",) * 4, ("new",) * 3))
    with LeRobotV3Writer(options=support.fast_options()).resume(root) as session:
        assert (session.num_episodes, session.num_frames) == (3, 75)
        for ep, length in enumerate(plan.lengths):
            for t in range(length):
                frame = support.frame(plan, ep, t)
                frame["observation.images.front"] = support.picture((48, 64, 3), ep, t, salt=0)
                session.add_frame(frame)
            session.save_episode()
    meta = LeRobotMetaReader().read_meta(root)
    assert (meta.total_episodes, meta.total_frames) == (5, 82)
    assert meta.tasks == ("pick the cube", "place the cube", "new")
    rows = support.episodes_table(root).to_pylist()
    # LeRobot's files are left alone; the new episodes start the next files, as LeRobot resumes.
    assert [(r["data/chunk_index"], r["data/file_index"]) for r in rows[3:]] == [(0, 1)] * 2
    after = support.data_table(root)
    assert after.slice(0, 75).equals(before.cast(after.schema))
    assert after.column("index").to_pylist()[75:] == list(range(75, 82))
    assert after.column("task_index").to_pylist()[75:] == [0] * 4 + [2] * 3
    for ep, row in enumerate(rows[3:]):
        frames = support.video_frames(root, row, "observation.images.front", 10)
        assert len(frames) == plan.lengths[ep]
