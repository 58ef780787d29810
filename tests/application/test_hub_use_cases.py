"""The Hub use cases' rules with the in-memory Hub: which files, which revision, what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.memory.hub import InMemoryHub
from rlctl.application.episode_spec import format_episode_spec, parse_episode_spec
from rlctl.application.ports.hub import (
    HubError,
    HubNotCached,
    HubRevisionNotFound,
    check_repo_id,
)
from rlctl.application.use_cases.pull_dataset import (
    PullDataset,
    PullDatasetRequest,
    ResolveDataset,
)
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest
from rlctl.application.use_cases.push_policy import PushPolicy, PushPolicyRequest
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import CorruptDataset, InvalidInput
from rlctl.domain.features import features_from_info

REPO = "alice/demo"
CAMERA = "observation.images.top"
FEATURES = features_from_info(
    {
        "observation.state": {"dtype": "float32", "shape": [2], "names": None},
        CAMERA: {"dtype": "video", "shape": [8, 8, 3], "names": ["height", "width", "channels"]},
    }
)


def data_file(i: int) -> str:
    return f"data/chunk-000/file-{i:03d}.parquet"


def video_file(i: int) -> str:
    return f"videos/{CAMERA}/chunk-000/file-{i:03d}.mp4"


def make_meta(files_of_episodes: list[int]) -> DatasetMeta:
    """Episode i lives in data file and video file `files_of_episodes[i]`; 5 frames each."""
    episodes = []
    for index, file_index in enumerate(files_of_episodes):
        columns = {
            "data/chunk_index": 0,
            "data/file_index": file_index,
            f"videos/{CAMERA}/chunk_index": 0,
            f"videos/{CAMERA}/file_index": file_index,
        }
        episodes.append(EpisodeRecord(index, 5, ("task",), 5 * index, 5 * index + 5, columns))
    return DatasetMeta(
        codebase_version="v3.0",
        fps=10,
        features=FEATURES,
        total_episodes=len(episodes),
        total_frames=5 * len(episodes),
        tasks=("task",),
        episodes=tuple(episodes),
        robot_type="koch",
        info={"codebase_version": "v3.0", "fps": 10},
    )


class FixedMetaReader:
    """Whatever the folder, the dataset says `meta` (the files' content is not the point here)."""

    def __init__(self, meta: DatasetMeta) -> None:
        self.meta = meta
        self.read: list[str] = []

    def read_meta(self, location: str) -> DatasetMeta:
        self.read.append(location)
        return self.meta

    def size_on_disk(self, location: str) -> int:
        return 0


def write_dataset(root: Path, meta: DatasetMeta) -> Path:
    for name in ("meta/info.json", "meta/stats.json", "meta/episodes/chunk-000/file-000.parquet"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    for i in {int(e.columns["data/file_index"]) for e in meta.episodes}:
        for name in (data_file(i), video_file(i)):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(name.encode())
    return root


@pytest.fixture
def meta() -> DatasetMeta:
    return make_meta([0, 0, 1, 1, 2])


@pytest.fixture
def world(tmp_path: Path, meta: DatasetMeta):
    hub = InMemoryHub(tmp_path / "hub")
    reader = FixedMetaReader(meta)
    root = write_dataset(tmp_path / "dataset", meta)
    push = PushDataset(hub, reader, LeRobotLayout())
    pull = PullDataset(hub, reader, LeRobotLayout())
    return hub, root, push, pull


# --- episode selections --------------------------------------------------------------------


@given(st.sets(st.integers(0, 300), min_size=1))
def test_a_formatted_selection_parses_back_to_itself(indices):
    assert parse_episode_spec(format_episode_spec(indices)) == tuple(sorted(indices))


def test_selections_take_ranges_single_episodes_and_open_ends():
    assert parse_episode_spec("0-4,7") == (0, 1, 2, 3, 4, 7)
    assert parse_episode_spec(" 3 , 1-2 ,3") == (1, 2, 3)
    assert parse_episode_spec("8-", total=10) == (8, 9)
    assert format_episode_spec([0, 1, 2, 3, 7, 9, 10]) == "0-3,7,9-10"


@pytest.mark.parametrize(
    ("spec", "total", "message"),
    [
        ("a", None, "not an episode or a range"),
        ("4-2", None, "runs backwards"),
        ("3-", None, "needs the number of episodes"),
        ("", None, "empty"),
        ("2,5-6", 5, "5-6 do not exist"),
    ],
)
def test_bad_selections_say_what_is_wrong(spec, total, message):
    with pytest.raises(InvalidInput, match=message):
        parse_episode_spec(spec, total)


@pytest.mark.parametrize("bad", ["nobody", "a/b/c", "a/", "/x", "a/b..c", "-a/b"])
def test_repo_ids_are_checked_before_any_request(bad):
    with pytest.raises(InvalidInput, match="not a Hub repo id"):
        check_repo_id(bad)


# --- push and pull ---------------------------------------------------------------------------


def test_a_push_is_one_commit_tagged_with_the_format_version(world):
    hub, root, push, _ = world
    (root / "images" / CAMERA).mkdir(parents=True)
    (root / "images" / CAMERA / "frame-0.png").write_bytes(b"temporary frame")

    result = push(PushDatasetRequest(str(root), REPO, tags=("kitchen",)))

    repo = hub.repos[("dataset", REPO)]
    assert repo.tags["v3.0"] == repo.branches["main"] == result.commit
    files = repo.commits[result.commit]
    assert not any(name.startswith("images/") for name in files)
    assert data_file(2) in files
    assert b"kitchen" in files["README.md"]


def test_a_push_without_videos_leaves_them_out(world):
    hub, root, push, _ = world

    result = push(PushDatasetRequest(str(root), REPO, videos=False))

    files = hub.repos[("dataset", REPO)].commits[result.commit]
    assert data_file(0) in files
    assert not any(name.startswith("videos/") for name in files)


def test_an_incomplete_dataset_is_not_pushed(world):
    hub, root, push, _ = world
    (root / video_file(1)).unlink()

    with pytest.raises(CorruptDataset, match=r"1 file\(s\) that meta/episodes names"):
        push(PushDatasetRequest(str(root), REPO))

    assert hub.repos == {}


def test_nothing_is_pushed_offline(world):
    hub, root, push, _ = world
    hub.offline = True

    with pytest.raises(HubError, match="offline"):
        push(PushDatasetRequest(str(root), REPO))


def test_a_pull_by_episodes_fetches_metadata_then_only_their_files(world):
    hub, root, push, pull = world
    push(PushDatasetRequest(str(root), REPO))

    pulled = pull(PullDatasetRequest(REPO, episodes="2-3"))

    assert pulled.episodes == (2, 3)
    assert pulled.files == (data_file(1), video_file(1))
    fetched = {name for _, _, name in hub.fetched}
    assert {data_file(1), video_file(1), "meta/info.json"} <= fetched
    assert not {data_file(0), data_file(2), video_file(0), "README.md"} & fetched


def test_a_pull_of_episodes_beyond_the_dataset_names_the_range(world):
    _, root, push, pull = world
    push(PushDatasetRequest(str(root), REPO))

    with pytest.raises(InvalidInput, match=r"episode\(s\) 5-6 do not exist.*numbered 0-4"):
        pull(PullDatasetRequest(REPO, episodes="4-6"))


def test_without_the_version_tag_the_default_branch_is_pulled(world):
    _, root, push, pull = world
    result = push(PushDatasetRequest(str(root), REPO, tag_version=False))

    pulled = pull(PullDatasetRequest(REPO))

    assert (pulled.revision, pulled.commit) == ("main", result.commit)


def test_offline_a_repo_without_the_tag_is_read_from_its_cached_default_branch(world):
    hub, root, push, pull = world
    result = push(PushDatasetRequest(str(root), REPO, tag_version=False))
    pull(PullDatasetRequest(REPO))
    hub.offline = True

    assert pull(PullDatasetRequest(REPO)).commit == result.commit
    with pytest.raises(HubNotCached, match=r"never-pulled@v3\.0"):
        pull(PullDatasetRequest("alice/never-pulled"))


def test_a_revision_asked_for_is_never_swapped_for_another(world):
    _, root, push, pull = world
    push(PushDatasetRequest(str(root), REPO, tag_version=False))

    with pytest.raises(HubRevisionNotFound):
        pull(PullDatasetRequest(REPO, revision="v3.0"))


def test_offline_a_pull_names_the_files_the_cache_lacks(world):
    hub, root, push, pull = world
    push(PushDatasetRequest(str(root), REPO))
    pull(PullDatasetRequest(REPO, episodes="0-1"))
    hub.offline = True

    assert pull(PullDatasetRequest(REPO, episodes="1")).files == (data_file(0), video_file(0))
    with pytest.raises(HubNotCached) as error:
        pull(PullDatasetRequest(REPO, episodes="4"))
    assert data_file(2) in str(error.value)
    assert "rlctl dataset pull alice/demo --episodes 4" in error.value.hint


def test_resolve_prefers_a_folder_then_lerobot_home_then_the_hub(world, tmp_path):
    hub, root, push, pull = world
    resolve = ResolveDataset(hub, pull)
    assert resolve(root) == root
    assert resolve(tmp_path / "not-a-repo-id") == tmp_path / "not-a-repo-id"
    home = write_dataset(hub.home_root("bob/recorded"), make_meta([0]))
    assert resolve("bob/recorded") == home
    push(PushDatasetRequest(str(root), REPO))
    assert resolve(REPO).parent.name == REPO.split("/")[1]
    legacy = write_dataset(hub.home_root(REPO), make_meta([0]))
    (legacy / ".cache" / "huggingface" / "download").mkdir(parents=True)
    assert resolve(REPO) != legacy  # an old LeRobot mirror: the revision-safe cache wins


def test_a_policy_push_sends_loader_files_and_a_card(tmp_path):
    hub = InMemoryHub(tmp_path / "hub")
    folder = tmp_path / "run" / "pretrained_model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"type": "diffusion", "input_features": {}}))
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "optimizer_state.pt").write_bytes(b"never pushed")
    (folder / "train_config.json").write_text(
        json.dumps({"steps": 10, "dataset": {"repo_id": "alice/demo"}})
    )

    result = PushPolicy(hub)(PushPolicyRequest(str(tmp_path / "run"), "alice/policy"))

    files = hub.repos[("model", "alice/policy")].commits[result.commit]
    assert set(files) == {"config.json", "model.safetensors", "train_config.json", "README.md"}
    assert b'- "alice/demo"' in files["README.md"]


def test_a_checkpoint_without_weights_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")

    with pytest.raises(InvalidInput, match="no weights"):
        PushPolicy(InMemoryHub(tmp_path / "hub"))(PushPolicyRequest(str(tmp_path), "alice/p"))
