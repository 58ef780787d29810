"""An edit in place killed with SIGKILL at any moment: the dataset at the path is whole (the old
one or the new one) with the user's files, the next writer or `check --fix` removes everything
the killed one left, and a blind retry of the same deletion deletes nothing more.

The edit runs in a child process that counts its own file operations (Python's audit events:
renames, links, removals, folder creations, opens, the swap's system call) and kills itself with
SIGKILL at a chosen one, so the kill points spread over the whole edit, swap included.
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.application.use_cases.dataset_rebuild import EditAlreadyApplied
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes


def _load(name: str):
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _load("tools_support")
ws = support.writer
PLAN = ws.DatasetPlan(
    fps=10, state_dim=2, episodes=(("a",) * 3, ("b",) * 4, ("a",) * 3), video=True, image=True
)

# argv: root, tool, kill_at (0: count the events and print their number; -1: kill right after
# the swap; n: SIGKILL at the n-th event).
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    root, tool, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    WATCHED = {
        "open", "os.rename", "os.link", "os.symlink", "os.remove", "os.rmdir", "os.mkdir",
        "shutil.rmtree", "shutil.copyfile", "ctypes.call_function", "os.truncate",
    }
    state = {"armed": False, "events": 0}

    def hook(event, args):
        if not state["armed"] or event not in WATCHED:
            return
        state["events"] += 1
        if state["events"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)
    from rlctl.adapters.memory.progress import SilentProgress
    from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
    from rlctl.adapters.storage.lerobot_v3.tools import folders
    from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
    from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
    from rlctl.application.use_cases.encode_videos import ReencodeVideos
    from rlctl.domain.video import VideoEncoding
    import av, pyarrow.parquet  # loaded before counting starts
    try:  # pyarrow imports pandas on first use where it is installed: not the edit's work
        import pandas
    except ImportError:
        pass

    if kill_at == -1:
        exchange = folders.exchange

        def exchange_then_die(a, b):
            done = exchange(a, b)
            os.kill(os.getpid(), signal.SIGKILL)
            return done

        folders.exchange = exchange_then_die
    parts = (LeRobotMetaReader(), LeRobotRebuilder(), folders.LocalDatasetFolders(),
             SilentProgress())
    state["armed"] = True
    if tool == "delete":
        DeleteEpisodes(*parts)(root, "1")
    else:
        ReencodeVideos(*parts)(root, VideoEncoding(codec="h264", crf=10))
    state["armed"] = False
    print("events", state["events"], flush=True)
    """
)


def run_child(root: Path, tool: str, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(root), tool, str(kill_at)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def parts():
    return LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress()


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kills") / "source"
    ws.write(root, PLAN)
    return root


def fresh(source: Path, folder: Path) -> Path:
    folder.mkdir()
    root = support.copy_dataset(source, folder / "ds")
    (root / "notes.txt").write_text("mine")
    (root / "sub").mkdir()
    (root / "sub" / "more.txt").write_text("mine too")
    return root


def assert_whole_and_clean(root: Path, episodes: set[int]) -> int:
    """The dataset is one of the expected ones, readable, with the user's files and no
    leftover anywhere; its number of episodes."""
    meta = LeRobotMetaReader().read_meta(root)
    assert meta.total_episodes in episodes
    report = CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))
    assert report.ok and not report.warnings, report.problems
    assert len(support.items(root)) == meta.total_frames
    assert (root / "notes.txt").read_text() == "mine"
    assert (root / "sub" / "more.txt").read_text() == "mine too"
    assert sorted(p.name for p in root.parent.iterdir()) == ["ds"]
    assert not (root / ".rlctl-staging").exists()
    assert [p for p in root.rglob("*") if ".rlctl-tmp" in p.name or ".partial-" in p.name] == []
    return meta.total_episodes


def count_events(source: Path, folder: Path, tool: str) -> int:
    done = run_child(fresh(source, folder), tool, 0)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split("events")[-1])


@pytest.mark.slow  # a dozen Python processes start
@pytest.mark.parametrize("tool", ["delete", "reencode"])
def test_a_killed_edit_leaves_a_whole_dataset_and_the_next_writer_cleans_up(tool, source, tmp_path):
    total = count_events(source, tmp_path / "count", tool)
    assert total > 10
    # One point in each fifth of the edit, so the kills spread over all of it, swap included.
    rng = random.Random(f"{tool}-24")
    chosen = [rng.randint(total * k // 5 + 1, total * (k + 1) // 5) for k in range(5)]
    seen, left_behind = set(), 0
    for number, kill_at in enumerate(chosen):
        root = fresh(source, tmp_path / f"kill-{kill_at}")
        done = run_child(root, tool, kill_at)
        assert done.returncode == -signal.SIGKILL, (kill_at, done.stdout, done.stderr)
        left_behind += len(list(root.parent.iterdir())) > 1 or (root / ".rlctl-staging").exists()
        if number % 2:
            LocalDatasetFolders().clean_leftovers(str(root))  # `dataset check --fix`
        else:  # the next writer: the same edit again (refused when it was already done)
            with contextlib.suppress(EditAlreadyApplied):
                run_again(root, tool)
        seen.add(assert_whole_and_clean(root, {2, 3}))
    assert left_behind  # the kills did leave work behind, which was removed


def run_again(root: Path, tool: str) -> None:
    if tool == "delete":
        DeleteEpisodes(*parts())(str(root), "1")
    else:
        from rlctl.application.use_cases.encode_videos import ReencodeVideos
        from rlctl.domain.video import VideoEncoding

        ReencodeVideos(*parts())(str(root), VideoEncoding(codec="h264", crf=10))


@pytest.mark.slow  # two Python processes start
def test_a_blind_retry_after_a_kill_past_the_swap_deletes_nothing_more(source, tmp_path):
    root = fresh(source, tmp_path / "after")
    before = LeRobotMetaReader().read_meta(root)
    done = run_child(root, "delete", -1)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert LeRobotMetaReader().read_meta(root).total_episodes == 2  # the swap was done
    assert len(list(tmp_path.joinpath("after").iterdir())) == 2  # the original, left beside

    with pytest.raises(EditAlreadyApplied) as caught:
        DeleteEpisodes(*parts())(str(root), "1")
    assert "--force" in caught.value.hint
    assert assert_whole_and_clean(root, {2}) == 2  # the retry's lock removed the original
    meta = LeRobotMetaReader().read_meta(root)
    assert [e.length for e in meta.episodes] == [before.episodes[0].length, 3]

    # Killed before the swap: the retry is the first real run and deletes the episode.
    root = fresh(source, tmp_path / "before")
    done = run_child(root, "delete", 3)
    assert done.returncode == -signal.SIGKILL
    assert LeRobotMetaReader().read_meta(root).total_episodes == 3
    DeleteEpisodes(*parts())(str(root), "1")
    assert assert_whole_and_clean(root, {2}) == 2

    # On purpose, the same request applies again.
    DeleteEpisodes(*parts())(str(root), "1", force=True)
    assert assert_whole_and_clean(root, {1}) == 1
