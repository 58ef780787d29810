"""Push a LeRobot-written dataset to a fake Hub and pull it back with the real huggingface_hub."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub.constants
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.application.ports.hub import HubNotCached
from rlctl.application.use_cases.pull_dataset import PullDataset, PullDatasetRequest
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest
from rlctl.entrypoints.container import build_container

pytestmark = pytest.mark.timeout(60)

REPO = "alice/sim_video"
FRONT = "observation.images.front"
DATA_0 = "data/chunk-000/file-000.parquet"
DATA_1 = "data/chunk-000/file-001.parquet"
VIDEO_0 = f"videos/{FRONT}/chunk-000/file-000.mp4"
VIDEO_1 = f"videos/{FRONT}/chunk-000/file-001.mp4"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"


def resolve_location(location, **options) -> Path:
    """A folder or repo id to a local dataset root, as the container composes `ResolveDataset`."""
    return build_container().resolve_dataset()(location, **options)


def push(root: Path, **options) -> object:
    use_case = PushDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())
    return use_case(PushDatasetRequest(str(root), REPO, **options))


def pull(**options):
    use_case = PullDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())
    return use_case(PullDatasetRequest(REPO, **options))


def files_of(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".cache" not in p.relative_to(root).parts
    )


@pytest.fixture
def two_file_dataset(sim_video_copy: Path) -> Path:
    """sim_video with episode 2 moved (on paper) to a second data file and a second mp4."""
    root = sim_video_copy
    table = pq.read_table(root / EPISODES)
    for column in ("data/file_index", f"videos/{FRONT}/file_index"):
        values = table.column(column).to_pylist()
        values[2] = 1
        position = table.schema.get_field_index(column)
        table = table.set_column(
            position, column, pa.array(values, type=table.schema.field(column).type)
        )
    pq.write_table(table, root / EPISODES)
    shutil.copy(root / DATA_0, root / DATA_1)
    shutil.copy(root / VIDEO_0, root / VIDEO_1)
    return root


def test_push_then_pull_gives_back_every_file_in_lerobots_cache(fake_hub, hub_env, sim_video_copy):
    (sim_video_copy / "images" / FRONT).mkdir(parents=True)
    (sim_video_copy / "images" / FRONT / "frame-000000.png").write_bytes(b"temporary")

    result = push(sim_video_copy, tags=("so101", "tutorial"))

    remote = fake_hub.repo("dataset", REPO)
    assert remote.branches["main"] == result.commit == remote.tags["v3.0"]
    assert not any(name.startswith("images/") for name in remote.commits[result.commit])
    pulled = pull()
    cache = hub_env / "lerobot" / "hub" / "datasets--alice--sim_video"
    assert pulled.root == cache / "snapshots" / result.commit
    assert pulled.revision == "v3.0"
    assert (cache / "refs" / "v3.0").read_text() == result.commit
    pushed = [f for f in files_of(sim_video_copy) if not f.startswith("images/")]
    for name in pushed:
        assert (pulled.root / name).read_bytes() == (sim_video_copy / name).read_bytes(), name
    assert set(files_of(pulled.root)) == {*pushed, "README.md", ".gitattributes"}
    assert LeRobotMetaReader().read_meta(pulled.root).total_episodes == 3


def test_the_dataset_card_carries_lerobots_metadata(fake_hub, hub_env, sim_video_copy):
    result = push(sim_video_copy, tags=("so101",), license="mit")

    card = fake_hub.repo("dataset", REPO).commits[result.commit]["README.md"].decode()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["license"] == "mit"
    assert header["tags"] == ["LeRobot", "so101"]
    assert header["task_categories"] == ["robotics"]
    assert header["configs"] == [{"config_name": "default", "data_files": "data/*/*.parquet"}]
    assert "so101_follower" in card
    assert "pick the cube" in card
    assert '"codebase_version": "v3.0"' in card


def test_pulling_by_episodes_fetches_only_the_files_they_need(fake_hub, hub_env, two_file_dataset):
    push(two_file_dataset)

    first = pull(episodes="0-1")

    assert first.episodes == (0, 1)
    assert set(first.files) == {DATA_0, VIDEO_0}
    got = set(files_of(first.root))
    assert {DATA_0, VIDEO_0, EPISODES, "meta/info.json", "meta/stats.json"} <= got
    assert not {DATA_1, VIDEO_1} & got
    assert not fake_hub.file_gets("file-001.parquet")

    second = pull(episodes="2")

    assert second.root == first.root
    assert set(second.files) == {DATA_1, VIDEO_1}
    assert (second.root / DATA_1).read_bytes() == (two_file_dataset / DATA_1).read_bytes()
    # meta/ and the first episodes' files were cached: each was fetched once.
    assert len(fake_hub.file_gets("meta/info.json")) == 1
    assert len(fake_hub.file_gets(DATA_0)) == 1


def test_pulling_without_videos_skips_them(fake_hub, hub_env, sim_video_copy):
    push(sim_video_copy)

    pulled = pull(videos=False)

    assert DATA_0 in files_of(pulled.root)
    assert not any(f.startswith("videos/") for f in files_of(pulled.root))


def test_a_dropped_connection_resumes_from_the_byte_it_reached(
    fake_hub, hub_env, sim_video_copy, monkeypatch
):
    # huggingface_hub writes what it received in 10 MB chunks; smaller ones let a 16 kB file
    # break off mid-way with part of it written.
    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", 1000)
    push(sim_video_copy)
    fake_hub.interrupt(VIDEO_0, times=1, after_bytes=5000)

    pulled = pull()

    gets = fake_hub.file_gets(VIDEO_0)
    assert len(gets) == 2
    assert gets[1].headers.get("range") == "bytes=5000-"
    assert (pulled.root / VIDEO_0).read_bytes() == (sim_video_copy / VIDEO_0).read_bytes()


def test_pulling_again_after_a_pull_transfers_no_file(fake_hub, hub_env, sim_video_copy):
    push(sim_video_copy)
    pull()
    before = len(fake_hub.file_gets())

    pull()

    assert len(fake_hub.file_gets()) == before


def test_offline_mode_reads_the_cache_and_names_what_it_lacks(
    fake_hub, hub_env, two_file_dataset, monkeypatch
):
    push(two_file_dataset)
    online = pull(episodes="0-1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(fake_hub.requests)

    offline = pull(episodes="0")

    assert offline.root == online.root
    assert len(fake_hub.requests) == before
    with pytest.raises(HubNotCached) as missing_episode:
        pull(episodes="2")
    assert DATA_1 in str(missing_episode.value)
    assert "HF_HUB_OFFLINE=0 rlctl dataset pull alice/sim_video --episodes 2" in (
        missing_episode.value.hint or ""
    )
    with pytest.raises(HubNotCached) as missing_files:
        pull()
    assert "4 file(s) missing: " in str(missing_files.value)
    assert DATA_1 in str(missing_files.value)
    with pytest.raises(HubNotCached) as never_pulled:
        PullDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())(
            PullDatasetRequest("alice/elsewhere")
        )
    assert "dataset alice/elsewhere@v3.0" in str(never_pulled.value)
    assert "offline mode" in str(never_pulled.value)
    assert len(fake_hub.requests) == before


def test_a_repo_without_the_version_tag_is_pulled_from_its_default_branch(
    fake_hub, hub_env, sim_video_copy
):
    result = push(sim_video_copy, tag_version=False)

    pulled = pull()

    assert pulled.revision == "main"
    assert pulled.commit == result.commit


def test_a_push_to_a_branch_leaves_main_alone(fake_hub, hub_env, sim_video_copy):
    result = push(sim_video_copy, branch="experiment", private=True)

    remote = fake_hub.repo("dataset", REPO)
    assert remote.private
    assert remote.branches["experiment"] == result.commit != remote.branches["main"]
    assert result.url.endswith("/datasets/alice/sim_video/tree/experiment")
    assert pull(revision="experiment").commit == result.commit


def test_resolve_location_takes_a_path_or_a_repo_id(fake_hub, hub_env, sim_video_copy, monkeypatch):
    assert resolve_location(str(sim_video_copy)) == sim_video_copy
    result = push(sim_video_copy)

    root = resolve_location(REPO)

    assert root.name == result.commit
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_location(REPO) == root


def test_a_dataset_in_lerobot_home_is_used_without_the_hub(fake_hub, hub_env, sim_video_copy):
    home = hub_env / "lerobot" / "bob" / "recorded"
    shutil.copytree(sim_video_copy, home)

    assert resolve_location("bob/recorded") == home
    assert fake_hub.requests == []
