"""`dataset push` sends the dataset's own files and nothing else: not the user's other files, not
a killed writer's staging folder, temporary files, lock or edit journal, and never what a
symbolic link leads to outside the folder (refused, naming the link). Checked with the Hub in
memory and with the real adapter's file selection (no network)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rlctl.adapters.hub.huggingface import files_to_push
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.memory.hub import InMemoryHub
from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.application.ports.hub import PushRequest, RepoRef
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest
from rlctl.application.use_cases.split_dataset import SplitDataset
from rlctl.domain.errors import InvalidInput, RlctlError


def _load(name: str):
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _load("tools_support")
ws = support.writer
PLAN = ws.DatasetPlan(fps=10, state_dim=2, episodes=(("a",) * 3, ("b",) * 4), video=True)
REPO = "alice/demo"


def parts():
    return LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress()


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    ws.write(root, PLAN)
    DeleteEpisodes(*parts())(str(root), "0", force=False)  # an edit journal, and a card below
    return root


def own_files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for folder in ("meta", "data", "videos")
        for p in (root / folder).rglob("*")
        if p.is_file()
    }


def push(root: Path, hub: InMemoryHub) -> dict[str, bytes]:
    result = PushDataset(hub, LeRobotMetaReader(), LeRobotLayout())(
        PushDatasetRequest(str(root), REPO)
    )
    return hub.repos[("dataset", REPO)].commits[result.commit]


def add_clutter(root: Path, tmp_path: Path) -> None:
    """What a folder may hold besides the dataset, and a killed writer's leftovers."""
    (root / "notes.txt").write_text("private notes")
    (root / ".env").write_text("TOKEN=secret")
    (root / ".rlctl-lock").write_text('{"pid": 1}')
    (root / ".rlctl-staging" / "front").mkdir(parents=True)
    (root / ".rlctl-staging" / "front" / "episode-000001.mp4").write_bytes(b"half")
    (root / "meta" / ".info.json.4242.rlctl-tmp").write_text("{}")
    video = next((root / "videos").rglob("*.mp4"))
    (video.parent / f".{video.stem}.partial-4242.mp4").write_bytes(b"half")
    (root / ".ds.rlctl-edit-4242-0").mkdir()  # an edit folder in the wrong place
    (root / ".ds.rlctl-edit-4242-0" / "x").write_text("x")
    secret = tmp_path / "secret.txt"
    secret.write_text("the machine's secret")
    (root / "outside-link").symlink_to(secret)
    SplitDataset(*parts())(str(root), str(root / "sub"), episodes="0")


def test_a_push_sends_only_the_datasets_own_files(dataset, tmp_path):
    expected = own_files(dataset)
    add_clutter(dataset, tmp_path)
    files = push(dataset, InMemoryHub(tmp_path / "hub"))
    assert set(files) == expected | {"README.md"}
    assert not any(b"secret" in content for content in files.values())


def test_a_dataset_file_linked_from_outside_the_folder_is_refused(dataset, tmp_path):
    info = dataset / "meta" / "info.json"
    moved = tmp_path / "elsewhere.json"
    moved.write_bytes(info.read_bytes())
    info.unlink()
    info.symlink_to(moved)
    hub = InMemoryHub(tmp_path / "hub")
    # Refused when the metadata is read (a link out of the dataset), before any file is chosen.
    with pytest.raises(RlctlError) as caught:
        push(dataset, hub)
    text = str(caught.value)
    assert "info.json" in text and ("out of the folder" in text or "outside the dataset" in text)
    assert hub.repos == {}


def test_a_video_folder_linked_from_outside_is_refused(dataset, tmp_path):
    videos = dataset / "videos"
    videos.rename(tmp_path / "videos")
    videos.symlink_to(tmp_path / "videos")
    hub = InMemoryHub(tmp_path / "hub")
    with pytest.raises(InvalidInput, match="symbolic link"):
        push(dataset, hub)
    assert hub.repos == {}


def test_links_inside_the_folder_are_sent_as_the_files_they_name(dataset, tmp_path):
    data = next((dataset / "data").rglob("*.parquet"))
    kept = dataset / "store" / "data.parquet"
    kept.parent.mkdir()
    data.rename(kept)
    data.symlink_to(kept)
    files = push(dataset, InMemoryHub(tmp_path / "hub"))
    name = data.relative_to(dataset).as_posix()
    assert files[name] == kept.read_bytes()
    assert not any(n.startswith("store/") for n in files)


def test_the_real_hubs_selection_skips_leftovers_and_refuses_outside_links(dataset, tmp_path):
    expected = own_files(dataset)
    add_clutter(dataset, tmp_path)

    def request(**options) -> PushRequest:
        return PushRequest(
            repo=RepoRef("alice/demo", "dataset"),
            folder=dataset,
            card="card",
            commit_message="m",
            **options,
        )

    names = files_to_push(request(ignore=("outside-link",)))
    assert "notes.txt" in names and "sub/meta/info.json" in names  # no allow-list: the folder
    for name in names:
        assert ".rlctl" not in name and ".partial-" not in name, name
    with pytest.raises(InvalidInput, match="outside-link"):
        files_to_push(request())
    own = files_to_push(request(allow=("meta/", "data/", "videos/")))
    assert set(own) == expected
