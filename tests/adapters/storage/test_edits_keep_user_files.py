"""Edits in place on real folders keep what the user put beside the data, leave nothing behind,
and a reader opened before an edit says the dataset changed instead of returning other frames.

Every tool that rebuilds a dataset in place is run on a folder holding a Hub card, notes, hidden
files, an extra folder, links (one leading outside), a note inside meta/ and a dataset split into
a subfolder: each comes out untouched (files as hard links: the same inode, nothing copied), the
card's counts follow the new dataset, and the tool says what it kept.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.episode_data import LeRobotEpisodeData
from rlctl.adapters.storage.lerobot_v3.identity import DatasetChanged
from rlctl.adapters.storage.lerobot_v3.leftovers import edit_folder, old_folder, remove_leftovers
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.tools.edit_journal import JOURNAL_NAME
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.adapters.storage.lerobot_v3.tools.stats_access import LeRobotStatsAccess
from rlctl.adapters.storage.lerobot_v21.source import LeRobotV21Reader
from rlctl.application.hub_cards import dataset_card
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.application.use_cases.convert_dataset import ConvertDataset
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
from rlctl.application.use_cases.edit_features import AddFeatures, RemoveFeatures
from rlctl.application.use_cases.encode_videos import ConvertImagesToVideo, ReencodeVideos
from rlctl.application.use_cases.merge_datasets import MergeDatasets
from rlctl.application.use_cases.modify_tasks import ModifyTasks
from rlctl.application.use_cases.recompute_stats import RecomputeRequest, RecomputeStats
from rlctl.application.use_cases.split_dataset import SplitDataset
from rlctl.domain.video import VideoEncoding


def _load(name: str):
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _load("tools_support")
ws = support.writer
PLAN = ws.DatasetPlan(
    fps=10,
    state_dim=2,
    episodes=(("pick",) * 3, ("place",) * 4, ("pick",) * 3),
    video=True,
    image=True,
)


def parts():
    return LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress()


def check(root: Path) -> None:
    report = CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))
    assert report.ok, report.problems


# Each tool, run in place on ROOT; returns what the tool reported as kept (None: no rebuild).
EDITS: dict[str, Callable[[Path], tuple[str, ...] | None]] = {
    "delete-episodes": lambda root: DeleteEpisodes(*parts())(str(root), "1").kept,
    "modify-tasks": lambda root: ModifyTasks(*parts())(str(root), new_task="stack").kept,
    "remove-feature": lambda root: RemoveFeatures(*parts())(str(root), ws.IMAGE).kept,
    "add-feature": lambda root: (
        AddFeatures(*parts())(
            str(root),
            {"reward": (np.arange(10, dtype=np.float32), {"dtype": "float32", "shape": [1]})},
        ).kept
    ),
    "convert-images-to-video": lambda root: (
        ConvertImagesToVideo(*parts())(str(root), encoding=VideoEncoding(codec="h264", crf=10)).kept
    ),
    "reencode-videos": lambda root: (
        ReencodeVideos(*parts())(str(root), VideoEncoding(codec="h264", crf=10)).result.kept
    ),
    "recompute-stats": lambda root: (
        RecomputeStats(LeRobotMetaReader(), LeRobotStatsAccess(), SilentProgress())(
            RecomputeRequest(str(root))
        )
        and None
    ),
}


def add_user_files(root: Path, outside: Path) -> dict[str, bytes]:
    """Files of the user in and around the dataset; their content by relative path."""
    meta = LeRobotMetaReader().read_meta(root)
    files = {
        "README.md": dataset_card(meta, "alice/demo").encode(),
        "notes.txt": b"calibrated on monday\n",
        ".hidden": b"mine too",
        "extra/deep/weights.bin": os.urandom(2048),
        "meta/annotations.md": b"episode 2 is odd",
        "data/README.txt": b"how the data was taken",
        "videos/renders/overview.mp4": b"not a dataset video",
    }
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    (root / "link-to-notes").symlink_to("notes.txt")
    outside.write_text("outside the dataset")
    (root / "outside-link").symlink_to(outside)
    SplitDataset(*parts())(str(root), str(root / "sub"), episodes="0")
    SplitDataset(*parts())(str(root), str(root / "data" / "train"), episodes="1")
    return files


def assert_user_files(root: Path, files: dict[str, bytes], inodes: dict[str, int]) -> None:
    for name, content in files.items():
        if name == "README.md":
            continue
        assert (root / name).read_bytes() == content, name
        assert (root / name).stat().st_ino == inodes[name], f"{name} was copied, not linked"
    assert (root / "link-to-notes").readlink() == Path("notes.txt")
    assert (root / "outside-link").is_symlink()
    for nested in ("sub", "data/train"):
        assert LeRobotMetaReader().read_meta(root / nested).total_episodes == 1
        check(root / nested)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("edits") / "source"
    ws.write(root, PLAN)
    return root


@pytest.mark.parametrize("tool", list(EDITS))
def test_every_edit_in_place_keeps_the_users_files_and_leaves_nothing(tool, source, tmp_path):
    root = support.copy_dataset(source, tmp_path / "ds")
    files = add_user_files(root, tmp_path / "secret.txt")
    inodes = {name: (root / name).stat().st_ino for name in files}

    kept = EDITS[tool](root)

    assert_user_files(root, files, inodes)
    meta = LeRobotMetaReader().read_meta(root)
    card = (root / "README.md").read_text()
    assert f"| Episodes | {meta.total_episodes} |" in card
    assert f"| Frames | {meta.total_frames} |" in card
    if kept is not None:  # the tools that rebuild say what they kept
        assert set(kept) >= {
            ".hidden",
            "extra",
            "link-to-notes",
            "meta/annotations.md",
            "notes.txt",
            "outside-link",
            "sub",
            "data/README.txt",
            "data/train",
            "videos/renders/overview.mp4",
        }
        assert any(name.startswith("README.md") for name in kept)
    check(root)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "secret.txt"]
    assert not list(root.rglob("*.rlctl-tmp")) and not (root / ".rlctl-staging").exists()


def test_the_card_gets_the_new_counts_tasks_and_info(source, tmp_path):
    root = support.copy_dataset(source, tmp_path / "ds")
    old = LeRobotMetaReader().read_meta(root)
    (root / "README.md").write_text(dataset_card(old, "alice/demo") + "\nMy own words.\n")
    DeleteEpisodes(*parts())(str(root), "0,2")
    new = LeRobotMetaReader().read_meta(root)
    assert (root / "README.md").read_text() == dataset_card(new, "alice/demo") + (
        "\nMy own words.\n"
    )
    assert new.tasks == ("place",)


def test_a_card_without_counts_and_merge_split_outputs_inside_a_dataset_are_kept(source, tmp_path):
    root = support.copy_dataset(source, tmp_path / "ds")
    (root / "README.md").write_text("# my notes, no counts\n")
    MergeDatasets(*parts())([str(root), str(source)], str(root / "merged"))
    SplitDataset(*parts())(str(root), str(root / "parts"), fractions={"a": 0.5, "b": 0.5})
    result = ModifyTasks(*parts())(str(root), new_task="stack")
    assert (root / "README.md").read_text() == "# my notes, no counts\n"
    assert set(result.kept) == {"README.md", "merged", "parts"}
    for nested, episodes in (("merged", 6), ("parts/a", 1), ("parts/b", 2)):
        assert LeRobotMetaReader().read_meta(root / nested).total_episodes == episodes
        check(root / nested)


def test_converting_in_place_keeps_the_users_files_in_both_folders(source, tmp_path):
    v21 = support.make_v21(source, tmp_path / "ds")
    (v21 / "README.md").write_text("card")
    (v21 / "notes").mkdir()
    (v21 / "notes" / "a.txt").write_text("a")
    ConvertDataset(LeRobotV21Reader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress())(
        str(v21)
    )
    for root in (v21, tmp_path / "ds.v2.1"):
        assert (root / "README.md").read_text() == "card"
        assert (root / "notes" / "a.txt").read_text() == "a"
    assert not (v21 / "meta" / "tasks.jsonl").exists()  # the old layout's files are not carried
    check(v21)


# --- leftovers ----------------------------------------------------------------------------------


def dead_pid() -> int:
    """A process id no process has: a child that already exited and was reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    return child.pid


def test_the_next_writer_removes_what_dead_writers_left_and_nothing_else(source, tmp_path):
    root = support.copy_dataset(source, tmp_path / "ds")
    gone = dead_pid()
    mine = os.getpid()
    left = [
        edit_folder(root, gone, 0),
        old_folder(root, gone),
        root / ".rlctl-staging" / "front",
        root / "meta" / f".info.json.{gone}.rlctl-tmp",
        root / "videos" / ws.VIDEO / "chunk-000" / f".file-000.partial-{gone}.mp4",
        root / f".README.md.{gone}.rlctl-tmp",
    ]
    kept = [
        edit_folder(root, mine, 7),  # a live process's (this one's) edit
        root / "sub" / ".rlctl-staging",  # inside another dataset: its own writer's
        root / "sub" / f".x.{gone}.rlctl-tmp",
        root / "notes.rlctl-tmp.txt",
    ]
    for path in [*left, *kept]:
        if path.suffix in (".mp4", ".txt") or path.name.endswith(".rlctl-tmp"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x")
        else:
            path.mkdir(parents=True)
    (edit_folder(root, gone, 0) / "meta").mkdir()

    DeleteEpisodes(*parts())(str(root), "2")  # the next writer

    assert [p for p in left if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []
    assert LeRobotMetaReader().read_meta(root).total_episodes == 2


def test_an_edit_folder_whose_lock_is_held_is_not_removed(source, tmp_path):
    from rlctl.adapters.storage.dataset_lock import DatasetLock

    root = support.copy_dataset(source, tmp_path / "ds")
    busy = edit_folder(root, dead_pid(), 0)  # e.g. a process on another host, same pid space
    busy.mkdir()
    with DatasetLock(busy):
        assert remove_leftovers(root) == []
    assert busy.exists()
    assert remove_leftovers(root) == [str(busy)]


def test_an_original_parked_by_a_killed_two_rename_swap_is_put_back(source, tmp_path):
    root = support.copy_dataset(source, tmp_path / "ds")
    parked = old_folder(root, dead_pid())
    root.rename(parked)
    removed = LocalDatasetFolders().clean_leftovers(str(root))
    assert removed == (f"{parked} (put back in place)",)
    assert LeRobotMetaReader().read_meta(root).total_episodes == 3
    assert not parked.exists()


# --- readers ------------------------------------------------------------------------------------


def test_an_open_reader_fails_clearly_after_an_edit_in_place(source, tmp_path):
    root = support.copy_dataset(source, tmp_path / "ds")
    reader = LeRobotDatasetReader(root, video_backend="pyav")
    before = reader[3]  # opens the video file
    viewer = LeRobotEpisodeData()
    viewer.video_clips(str(root), 1)

    DeleteEpisodes(*parts())(str(root), "0")

    for read in (lambda: reader[3], lambda: reader[9], lambda: viewer.video_clips(str(root), 1)):
        with pytest.raises(DatasetChanged) as caught:
            read()
        text = str(caught.value)
        assert "changed while it was open" in text and "open it again" in text
        assert "edited by" in text
    fresh = LeRobotDatasetReader(root, video_backend="pyav")
    support.assert_same_frame(fresh[0], before)  # episode 1 is now episode 0


@pytest.mark.slow  # a DataLoader worker process starts
def test_a_dataloader_worker_fails_clearly_after_an_edit_in_place(source, tmp_path):
    import torch

    from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset

    root = support.copy_dataset(source, tmp_path / "ds")
    dataset = LeRobotTorchDataset(root, video_backend="pyav")
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=1, timeout=60)
    batches = iter(loader)
    next(batches)
    DeleteEpisodes(*parts())(str(root), "1")
    with pytest.raises(DatasetChanged, match="changed while it was open"):
        for _ in batches:
            pass


def test_the_journal_is_written_with_the_new_folder(source, tmp_path):
    root = support.copy_dataset(source, tmp_path / "ds")
    DeleteEpisodes(*parts())(str(root), "0")
    ModifyTasks(*parts())(str(root), new_task="stack")
    lines = (root / JOURNAL_NAME).read_text().splitlines()
    assert [line.split('"tool": ')[1].split('"')[1] for line in lines] == [
        "delete-episodes",
        "modify-tasks",
    ]


def test_a_dataset_reached_through_a_link_is_cleaned_where_it_really_is(source, tmp_path):
    real = support.copy_dataset(source, tmp_path / "real" / "ds")
    link = tmp_path / "link"
    link.symlink_to(real)
    left = edit_folder(real, dead_pid(), 0)
    left.mkdir()
    DeleteEpisodes(*parts())(str(link), "0")
    assert not left.exists() and sorted(p.name for p in real.parent.iterdir()) == ["ds"]
    assert link.is_symlink() and LeRobotMetaReader().read_meta(link).total_episodes == 2
