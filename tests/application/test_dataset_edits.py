"""The feature, task and video edits' use cases through the container, with the in-memory
adapters: LeRobot's rules and precedence, the lock of an edit in place, nothing lost on failure."""

from __future__ import annotations

import numpy as np
import pytest
from dependency_injector import providers

from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.adapters.memory.dataset_tools import InMemoryDatasetFolders, InMemoryDatasetRebuilder
from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.application.use_cases.dataset_rebuild import EditAlreadyApplied
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import DatasetError, InvalidInput, NotSupported
from rlctl.domain.features import features_from_info
from rlctl.domain.video import VideoEncoding
from rlctl.entrypoints.container import build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

HWC = ["height", "width", "channels"]
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [2], "names": None},
    "action": {"dtype": "float32", "shape": [2], "names": None},
    "observation.images.top": {"dtype": "image", "shape": [8, 8, 3], "names": HWC},
    "observation.images.side": {
        "dtype": "video",
        "shape": [8, 8, 3],
        "names": HWC,
        "info": {"video.codec": "av1", "video.pix_fmt": "yuv420p", "video.g": 2, "video.crf": 30},
    },
    "index": {"dtype": "int64", "shape": [1], "names": None},
}
SOURCE = "mem://ds"


def make_meta(episode_tasks: list[list[str]]) -> DatasetMeta:
    episodes, start, tasks = [], 0, []
    for index, frame_tasks in enumerate(episode_tasks):
        n = len(frame_tasks)
        episodes.append(
            EpisodeRecord(index, n, tuple(dict.fromkeys(frame_tasks)), start, start + n)
        )
        tasks += [t for t in frame_tasks if t not in tasks]
        start += n
    return DatasetMeta(
        codebase_version="v3.0",
        fps=10,
        features=features_from_info(FEATURES),
        total_episodes=len(episodes),
        total_frames=start,
        tasks=tuple(tasks),
        episodes=tuple(episodes),
    )


class Tools:
    def __init__(self, episodes: list[list[str]], fail_at: int | None = None) -> None:
        self.store = InMemoryDatasetStore()
        self.original = make_meta(episodes)
        self.store.add(SOURCE, self.original)
        self.rebuilder = InMemoryDatasetRebuilder(self.store, fail_at=fail_at)
        self.folders = InMemoryDatasetFolders(self.store)
        container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
        container.meta_reader.override(providers.Object(self.store))
        container.dataset_rebuilder.override(providers.Object(self.rebuilder))
        container.dataset_folders.override(providers.Object(self.folders))
        container.progress.override(providers.Object(RecordingProgress()))
        self.container = container

    def meta(self, location: str = SOURCE) -> DatasetMeta:
        return self.store.read_meta(location)


EPISODES = [["pick", "pick"], ["place"], ["push", "pick", "pick"]]


def test_modify_tasks_follows_lerobots_precedence():
    tools = Tools(EPISODES)
    tools.container.modify_tasks()(
        SOURCE, new_task="N", episode_tasks={0: "A"}, task_replacements={"place": "P"}
    )
    assert [e.tasks for e in tools.meta().episodes] == [("A",), ("P",), ("N",)]
    assert tools.meta().tasks == ("A", "P", "N")

    tools = Tools(EPISODES)
    tools.container.modify_tasks()(SOURCE, task_replacements={"pick": "lift"}, output="mem://o")
    assert [e.tasks for e in tools.meta("mem://o").episodes] == [
        ("lift",),
        ("place",),
        ("push", "lift"),  # each row keeps its own task, replaced
    ]
    assert tools.meta() is tools.original


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "no task change given"),
        ({"episode_tasks": {3: "x"}}, r"episode\(s\) 3 do not exist"),
        ({"task_replacements": {"fly": "x"}}, "the dataset has no task 'fly'"),
        ({"new_task": "  "}, "a task must be a non-empty string"),
    ],
)
def test_modify_tasks_refuses_what_lerobot_refuses(kwargs, message):
    tools = Tools(EPISODES)
    with pytest.raises(InvalidInput, match=message):
        tools.container.modify_tasks()(SOURCE, **kwargs)
    assert tools.meta() is tools.original


def test_added_values_are_split_by_episode():
    tools = Tools(EPISODES)
    values = np.arange(6, dtype=np.float32)
    info = {"dtype": "float32", "shape": [1], "names": None}
    tools.container.add_features()(SOURCE, {"next.reward": (values, info)})
    episodes = tools.meta().episodes
    assert [e.columns["next.reward"].ravel().tolist() for e in episodes] == [
        [0, 1],
        [2],
        [3, 4, 5],
    ]
    assert "next.reward" in tools.meta().features


@pytest.mark.parametrize(
    ("features", "error", "message"),
    [
        ({}, InvalidInput, "no feature to add"),
        (
            {"action": (np.zeros((6, 2)), {"dtype": "float32", "shape": [2]})},
            InvalidInput,
            "already exists",
        ),
        ({"x": (np.zeros((6, 2)), {"dtype": "float32"})}, InvalidInput, "'dtype' and 'shape'"),
        ({"x": (np.zeros((5, 2)), {"dtype": "float32", "shape": [2]})}, InvalidInput, "6 frames"),
        ({"x": (np.zeros((6, 1)), {"dtype": "int64", "shape": [1]})}, InvalidInput, "without loss"),
        (
            {"x": (np.zeros((6, 8, 8, 3)), {"dtype": "image", "shape": [8, 8, 3]})},
            NotSupported,
            "image",
        ),
    ],
)
def test_add_features_refuses_bad_values(features, error, message):
    tools = Tools(EPISODES)
    with pytest.raises(error, match=message):
        tools.container.add_features()(SOURCE, features)
    assert tools.meta() is tools.original


def test_remove_features_refuses_missing_and_required_ones():
    tools = Tools(EPISODES)
    with pytest.raises(InvalidInput, match="no feature 'nope'"):
        tools.container.remove_features()(SOURCE, ["action", "nope"])
    with pytest.raises(InvalidInput, match="'index' cannot be removed"):
        tools.container.remove_features()(SOURCE, "index")
    tools.container.remove_features()(SOURCE, ["observation.images.side"], output="mem://o")
    assert "observation.images.side" not in tools.meta("mem://o").features
    assert tools.meta() is tools.original


def test_an_edit_in_place_waits_for_no_one_and_a_failed_one_loses_nothing():
    tools = Tools(EPISODES)
    with tools.folders.lock(SOURCE), pytest.raises(DatasetError, match="another writer"):
        tools.container.remove_features()(SOURCE, "action")
    tools = Tools(EPISODES, fail_at=1)
    with pytest.raises(OSError, match="simulated"):
        tools.container.modify_tasks()(SOURCE, new_task="x")
    assert tools.meta() is tools.original
    assert tools.rebuilder.sessions[0].aborted


def test_convert_and_reencode_pick_their_cameras():
    tools = Tools(EPISODES)
    tools.container.convert_images_to_video()(SOURCE, "mem://v", episodes="0,2")
    converted = tools.meta("mem://v")
    assert converted.features["observation.images.top"].dtype == "video"
    assert converted.total_episodes == 2
    outcome = tools.container.reencode_videos()(SOURCE, VideoEncoding(codec="h264"), "mem://h")
    assert outcome.cameras == ("observation.images.side",)
    info = tools.meta("mem://h").features["observation.images.side"].info or {}
    assert not any(key.startswith("video.") for key in info)  # the adapter writes the new ones
    nothing = tools.container.reencode_videos()(SOURCE, VideoEncoding())
    assert nothing.cameras == () and nothing.result is None
    with pytest.raises(InvalidInput, match="no camera stored as images"):
        tools.container.convert_images_to_video()("mem://v")


# --- the journal: a repeat of the last edit is refused ------------------------------------------


def test_a_repeated_deletion_is_refused_unless_forced():
    tools = Tools(EPISODES)
    first = tools.container.delete_episodes()(SOURCE, "0")
    assert first.episodes == 2
    with pytest.raises(EditAlreadyApplied) as caught:
        tools.container.delete_episodes()(SOURCE, "0")
    assert "already applied" in caught.value.message and "--force" in caught.value.hint
    assert tools.meta().total_episodes == 2
    assert tools.container.delete_episodes()(SOURCE, "0", force=True).episodes == 1


def test_the_same_request_on_a_dataset_changed_since_is_not_a_repeat():
    tools = Tools(EPISODES)
    tools.container.delete_episodes()(SOURCE, "0")
    tools.container.modify_tasks()(SOURCE, new_task="stack")
    # The last edit is another one: deleting episode 0 again is a new request.
    assert tools.container.delete_episodes()(SOURCE, "0").episodes == 1


def test_writing_to_a_new_folder_is_never_a_repeat():
    tools = Tools(EPISODES)
    tools.container.delete_episodes()(SOURCE, "0")
    assert tools.container.delete_episodes()(SOURCE, "0", output="mem://copy").episodes == 1
    assert tools.meta().total_episodes == 2


@pytest.mark.parametrize(
    ("edit", "again"),
    [
        (
            lambda c: c.modify_tasks()(SOURCE, episode_tasks={1: "new"}),
            lambda c, force: c.modify_tasks()(SOURCE, episode_tasks={1: "new"}, force=force),
        ),
        (
            lambda c: c.remove_features()(SOURCE, "action"),
            lambda c, force: c.remove_features()(SOURCE, "observation.state", force=force),
        ),
    ],
)
def test_every_edit_in_place_is_journaled(edit, again):
    tools = Tools(EPISODES)
    edit(tools.container)
    record = tools.folders.last_edit(SOURCE)
    assert record is not None and record.after and record.before != record.after
    assert tools.folders.journals[SOURCE][-1] == record
    try:
        again(tools.container, False)
    except EditAlreadyApplied:
        again(tools.container, True)
    assert len(tools.folders.journals[SOURCE]) == 2


def test_a_failed_edit_leaves_no_journal_entry():
    tools = Tools(EPISODES, fail_at=1)
    with pytest.raises(OSError, match="simulated"):
        tools.container.delete_episodes()(SOURCE, "0")
    assert tools.folders.last_edit(SOURCE) is None
    assert tools.folders.journals == {}
