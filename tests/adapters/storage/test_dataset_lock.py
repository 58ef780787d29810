"""Writers are exclusive: one write lock per dataset root, readers never block.

Two real processes: a holder records into a dataset and waits; a second writer (another process,
or this one) stops at once with an error naming the holder. A holder killed with SIGKILL leaves a
lock the next writer takes over, and the episodes it committed are all there.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.dataset_lock import LOCK_NAME, DatasetLock, DatasetLocked
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.adapters.storage.lerobot_v3.tools.stats_access import LeRobotStatsAccess
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
from rlctl.application.use_cases.recompute_stats import RecomputeRequest, RecomputeStats


def _load(name: str):
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


writer = _load("writer_support")
PLAN = writer.DatasetPlan(fps=10, state_dim=2, episodes=(("a",) * 3, ("b",) * 4))

# A second process that resumes the dataset, records `episodes` episodes of 2 frames, says
# "ready" and waits for a line on stdin (or a SIGKILL) before finishing.
HOLDER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions

    root, episodes = sys.argv[1], int(sys.argv[2])
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    session = LeRobotV3Writer(options=options).resume(root)
    for _ in range(episodes):
        for _ in range(2):
            session.add_frame({
                "observation.state": np.zeros(2, np.float32),
                "action": np.ones(2, np.float32),
                "task": "held",
            })
        session.save_episode()
    session.flush()
    print("ready", flush=True)
    sys.stdin.readline()
    session.finalize()
    print("done", flush=True)
    """
)

# A process that tries to resume and prints what stopped it.
SECOND = textwrap.dedent(
    """
    import json, sys
    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
    from rlctl.domain.errors import RlctlError

    try:
        LeRobotV3Writer().resume(sys.argv[1]).finalize()
        print(json.dumps({"ok": True}))
    except RlctlError as err:
        print(json.dumps({"type": type(err).__name__, "message": err.message, "where": err.where}))
    """
)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    writer.write(root, PLAN)
    return root


def start_holder(root: Path, episodes: int) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), str(episodes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    seen = []
    for line in holder.stdout:  # log lines may come first
        seen.append(line.strip())
        if seen[-1] == "ready":
            return holder
    raise AssertionError(f"the holder did not start: {seen}")


def second_writer(root: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SECOND, str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two Python processes start
def test_a_second_writer_process_is_refused_until_the_holder_is_killed(dataset):
    holder = start_holder(dataset, episodes=2)
    try:
        body = json.loads((dataset / LOCK_NAME).read_text())
        assert body["pid"] == holder.pid and body["host"] == socket.gethostname()
        refused = second_writer(dataset)
        assert refused["type"] == "DatasetLocked", refused
        assert f"pid {holder.pid}" in refused["message"]
        assert socket.gethostname() in refused["message"]
        assert "-c" in refused["message"]  # the holder's command line
        # In this process too, and readers go on reading meanwhile.
        with pytest.raises(DatasetLocked):
            LeRobotV3Writer().resume(dataset)
        assert len(LeRobotDatasetReader(dataset, video_backend="pyav")) == 7 + 4
        assert CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(dataset)).ok
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert (dataset / LOCK_NAME).exists()  # left behind; its flock died with the process
    session = LeRobotV3Writer(options=writer.fast_options()).resume(dataset)
    assert json.loads((dataset / LOCK_NAME).read_text())["pid"] == os.getpid()
    session.finalize()
    assert not (dataset / LOCK_NAME).exists()
    meta = LeRobotMetaReader().read_meta(dataset)
    assert (meta.total_episodes, meta.total_frames) == (4, 11)


def test_a_lock_whose_holder_is_gone_from_this_host_is_stale(dataset):
    dead_pid = int(
        subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    path = dataset / LOCK_NAME
    # The flock is still held (say a forked child inherited it), but the named writer is gone.
    inherited = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(inherited, fcntl.LOCK_EX | fcntl.LOCK_NB)
        body = {"pid": dead_pid, "host": socket.gethostname(), "command": "gone", "started": "?"}
        os.write(inherited, json.dumps(body).encode())
        with DatasetLock(dataset, "taking over"):
            assert json.loads(path.read_text())["command"] == "taking over"
        assert not path.exists()
    finally:
        os.close(inherited)


def test_a_live_holder_on_this_host_is_respected(dataset):
    with DatasetLock(dataset, "first writer"):
        with pytest.raises(DatasetLocked) as caught:
            DatasetLock(dataset, "second writer").acquire()
        assert f"pid {os.getpid()}" in caught.value.message
        assert "first writer" in caught.value.message
        assert caught.value.where == str(dataset) and caught.value.hint
    with DatasetLock(dataset, "second writer"):
        pass
    assert not (dataset / LOCK_NAME).exists()


def test_a_garbage_lock_file_is_no_obstacle_once_its_flock_is_gone(dataset):
    (dataset / LOCK_NAME).write_bytes(b"\x00\xff not json" * 1000)
    with DatasetLock(dataset) as lock:
        assert lock.held


def test_tools_editing_in_place_stop_while_a_writer_holds_the_dataset(dataset):
    before = (dataset / "meta/info.json").read_bytes()
    stats_before = (dataset / "meta/stats.json").read_bytes()
    tools = (LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress())
    with DatasetLock(dataset, "rlctl record"):
        with pytest.raises(DatasetLocked, match="rlctl record"):
            DeleteEpisodes(*tools)(str(dataset), "0")
        with pytest.raises(DatasetLocked, match="rlctl record"):
            RecomputeStats(LeRobotMetaReader(), LeRobotStatsAccess(), SilentProgress())(
                RecomputeRequest(str(dataset))
            )
        with pytest.raises(DatasetLocked):
            LeRobotV3Writer().resume(dataset)
    assert (dataset / "meta/info.json").read_bytes() == before
    assert (dataset / "meta/stats.json").read_bytes() == stats_before
    # Free again: the edit runs, and leaves no lock file behind in either folder.
    result = DeleteEpisodes(*tools)(str(dataset), "0")
    assert result.episodes == 1
    assert not list(dataset.parent.rglob(LOCK_NAME))


def test_a_new_dataset_is_locked_while_recorded(tmp_path):
    root = tmp_path / "new"
    session = LeRobotV3Writer(options=writer.fast_options()).create(
        root, fps=10, features=PLAN.features()
    )
    try:
        with pytest.raises(DatasetLocked):
            LeRobotV3Writer().resume(root)
    finally:
        session.discard()
    assert not root.exists()


def test_a_tool_writing_a_new_folder_holds_it_until_done(dataset, tmp_path):
    output = tmp_path / "merged"
    rebuild = LeRobotRebuilder().start(output, LeRobotMetaReader().read_meta(dataset))
    try:
        with pytest.raises(DatasetLocked):
            LeRobotRebuilder().start(output, LeRobotMetaReader().read_meta(dataset))
    finally:
        rebuild.abort()
    assert not output.exists()


def test_two_recordings_into_one_new_folder(tmp_path):
    # The second `create` came between the first one's emptiness check and its info.json.
    root = tmp_path / "new"
    root.mkdir()
    with DatasetLock(root, "rlctl record (first)"), pytest.raises(DatasetLocked, match="first"):
        LeRobotV3Writer().create(root, fps=10, features=PLAN.features())
    assert [p.name for p in root.iterdir()] == []
    LeRobotV3Writer(options=writer.fast_options()).create(
        root, fps=10, features=PLAN.features()
    ).discard()


def test_a_pull_into_a_folder_a_writer_holds_stops_before_downloading(dataset, tmp_path):
    from rlctl.adapters.hub.huggingface import HuggingFaceHub
    from rlctl.adapters.hub.settings import HubSettings
    from rlctl.application.ports.hub import RepoRef

    home = tmp_path / "hf"
    settings = HubSettings(
        endpoint="http://127.0.0.1:9",
        hf_home=home,
        lerobot_home=home / "lerobot",
        models_cache=home / "hub",
        offline=True,
    )
    before = sorted(p.name for p in dataset.rglob("*"))
    with DatasetLock(dataset, "rlctl record"), pytest.raises(DatasetLocked, match="rlctl record"):
        HuggingFaceHub(settings).download(RepoRef("user/ds", "dataset", "v3.0"), local_dir=dataset)
    assert sorted(p.name for p in dataset.rglob("*")) == before
