"""Which files the viewer serves and exports: the dataset's own videos, also when they are links
of the Hub's cache into its `blobs/`, and nothing else however the path or the links are made."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path

import attrs
import pytest

from rlctl.adapters.storage.lerobot_v3.episode_data import LeRobotEpisodeData
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.viewer.server import ViewerServer, media_path
from rlctl.adapters.viewer.site import write_site
from rlctl.application.use_cases.view_dataset import ViewDataset
from rlctl.domain.errors import InvalidInput
from tests.adapters.viewer.hub_cache import hub_cache_copy

VIDEO = "videos/observation.images.front/chunk-000/file-000.mp4"
SECRET = b"\x00\x00\x00\x18ftypmp42 not the dataset's"


def open_viewer(root: Path, reader: LeRobotEpisodeData | None = None):
    return ViewDataset(LeRobotMetaReader(), reader or LeRobotEpisodeData())(str(root))


def get(server: ViewerServer, path: str, headers: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response, response.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def cache_layout(viewer_dataset, tmp_path_factory):
    """A Hub cache with our repo, another repo beside it, and a file outside the cache; links
    in our snapshot that lead out to each of them."""
    top = tmp_path_factory.mktemp("layout")
    cache = top / "cache"
    snapshot = hub_cache_copy(viewer_dataset, cache)
    other = hub_cache_copy(viewer_dataset, cache, repo="datasets--bob--other")
    secret = top / "secret.mp4"
    secret.write_bytes(SECRET)
    other_blob = (other / VIDEO).resolve()
    outside = top / "outside"
    outside.mkdir()
    (outside / "x.mp4").write_bytes(SECRET)
    videos = snapshot / "videos"
    (videos / "passwd.mp4").symlink_to("/etc/passwd")
    (videos / "secret.mp4").symlink_to(os.path.relpath(secret, videos))
    (videos / "absolute.mp4").symlink_to(secret)
    (videos / "other-repo.mp4").symlink_to(os.path.relpath(other_blob, videos))
    (videos / "elsewhere").symlink_to(outside, target_is_directory=True)
    (videos / "loop.mp4").symlink_to("loop.mp4")
    # Another revision of the same repo: its files lead into the same blobs/, but a request
    # names a path under this snapshot, never one beside it.
    older = snapshot.parent / ("0" * 40) / "videos"
    older.mkdir(parents=True)
    (older / "old.mp4").symlink_to(os.path.relpath((snapshot / VIDEO).resolve(), older))
    return snapshot, secret


REFUSED_LINKS = [
    "videos/passwd.mp4",  # a system file
    "videos/secret.mp4",  # a relative link out of the cache
    "videos/absolute.mp4",  # an absolute link out of the cache
    "videos/other-repo.mp4",  # a blob of another repo of the same cache
    "videos/elsewhere/x.mp4",  # a linked folder outside
    "videos/loop.mp4",  # a link to itself
]


def test_the_hub_cache_layout_is_links_into_blobs(hub_snapshot):
    video = hub_snapshot / VIDEO
    assert video.is_symlink() and not video.readlink().is_absolute()
    assert video.resolve().parent == hub_snapshot.parent.parent / "blobs"


def test_a_dataset_in_the_hub_cache_serves_its_videos(hub_snapshot, viewer_dataset):
    data = (viewer_dataset / VIDEO).read_bytes()
    with ViewerServer(open_viewer(hub_snapshot)) as server:
        response, body = get(server, f"/media/{VIDEO}", {"Range": "bytes=100-1099"})
        assert response.status == 206 and body == data[100:1100]
        # The type comes from the name asked for: the blob has no suffix.
        assert response.getheader("Content-Type") == "video/mp4"
        response, body = get(server, f"/media/{VIDEO}")
        assert response.status == 200 and body == data
        episode = json.loads(get(server, "/data/episode-1.json")[1])
        assert {clip["file"] for clip in episode["videos"]} == {
            VIDEO,
            VIDEO.replace("front", "wrist"),
        }
        for clip in episode["videos"]:
            assert get(server, f"/media/{clip['file']}", {"Range": "bytes=0-7"})[0].status == 206


@pytest.mark.parametrize("link", REFUSED_LINKS)
def test_links_leading_out_of_the_repo_are_refused(cache_layout, link):
    snapshot, _ = cache_layout
    assert (snapshot / link).is_symlink() or (snapshot / link).parent.is_symlink()
    assert media_path(snapshot.resolve(), link) is None


def test_the_server_refuses_links_and_paths_out_of_the_dataset(cache_layout):
    snapshot, secret = cache_layout
    up = os.path.relpath(secret, snapshot)  # ../../../../secret.mp4
    encoded_up = up.replace("..", "%2e%2e")
    requests = [
        *(f"/media/{link}" for link in REFUSED_LINKS),
        f"/media/{up}",
        f"/media/{encoded_up}",
        f"/media/{up.replace('/', '%2F')}",
        f"/media/videos/{up.replace('/', '%5C')}",
        f"/media/{secret}",  # //tmp/...: an absolute path
        f"/media/{str(secret).replace('/', '%2F')}",
        f"/media/videos/observation.images.front/../../{up}",
        "/media/../../../../../../etc/passwd",
        f"/media/../{'0' * 40}/videos/old.mp4",  # another revision, whose link is into blobs/
        f"/media/%2e%2e/{'0' * 40}/videos/old.mp4",
    ]
    with ViewerServer(open_viewer(snapshot)) as server:
        for path in requests:
            response, body = get(server, path)
            assert response.status == 404, path
            assert SECRET not in body and b"root:" not in body, path
        assert get(server, f"/media/{VIDEO}", {"Range": "bytes=0-7"})[0].status == 206


def test_media_paths_are_contained_by_name(viewer_dataset, tmp_path):
    root = viewer_dataset.resolve()
    assert media_path(root, VIDEO) == root / VIDEO
    assert media_path(root, VIDEO.upper().replace("VIDEOS", "videos")) is None  # no such file
    for bad in (
        "",
        "/" + VIDEO,
        "../" + root.name + "/" + VIDEO,
        "videos/../" + VIDEO,
        "./" + VIDEO,
        "videos//observation.images.front/chunk-000/file-000.mp4",
        VIDEO.replace("/", "\\"),
        VIDEO + "\x00.mp4",
        "meta/info.json",  # not a video
        "videos/observation.images.front/chunk-000",  # a folder
    ):
        assert media_path(root, bad) is None, bad


def test_only_a_real_hub_snapshot_may_lead_into_blobs(viewer_dataset, tmp_path):
    """A folder that merely sits beside a `blobs/` folder gets no links into it."""
    for shape in ("plain/dataset", "snapshots/rev", "models--a--b/snapshots/rev"):
        root = tmp_path / shape.replace("/", "_") / shape
        blobs = root.parent.parent / "blobs"
        blobs.mkdir(parents=True)
        (blobs / "x").write_bytes((viewer_dataset / VIDEO).read_bytes())
        (root / "videos").mkdir(parents=True)
        (root / "videos" / "x.mp4").symlink_to(os.path.relpath(blobs / "x", root / "videos"))
        assert media_path(root.resolve(), "videos/x.mp4") is None, shape
    # A link that stays inside the dataset is followed.
    root = tmp_path / "inside"
    (root / "videos").mkdir(parents=True)
    (root / "videos" / "real.mp4").write_bytes(b"....")
    (root / "videos" / "alias.mp4").symlink_to("real.mp4")
    assert media_path(root.resolve(), "videos/alias.mp4") == (root / "videos/real.mp4").resolve()


def test_the_static_export_of_a_hub_snapshot_holds_the_videos(
    hub_snapshot, viewer_dataset, tmp_path
):
    site = write_site(open_viewer(hub_snapshot), tmp_path / "site").parent
    copied = site / "media" / VIDEO
    assert not copied.is_symlink()
    assert copied.read_bytes() == (viewer_dataset / VIDEO).read_bytes()


class _ClipsNamedBy(LeRobotEpisodeData):
    """Metadata whose clips name another file (a hostile or damaged dataset)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name

    def video_clips(self, location, episode_index):
        clips = super().video_clips(location, episode_index)
        return [attrs.evolve(clip, file=self._name) for clip in clips]


@pytest.mark.parametrize("name", ["../../secret.mp4", "/etc/passwd.mp4", "videos/passwd.mp4"])
def test_the_static_export_refuses_videos_out_of_the_dataset(cache_layout, tmp_path, name):
    snapshot, _ = cache_layout
    out = tmp_path / "deep" / "site"
    with pytest.raises(InvalidInput, match="missing or not a video file inside the dataset") as err:
        write_site(open_viewer(snapshot, _ClipsNamedBy(name)), out)
    assert err.value.hint and "dataset check" in err.value.hint
    assert not any(p.is_file() and p.read_bytes() == SECRET for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("key", ["../../escape", "a/b", "..", "a\\b"])
def test_the_static_export_refuses_a_camera_key_that_is_a_path(image_dataset, tmp_path, key):
    viewer = open_viewer(image_dataset)
    viewer.page = attrs.evolve(viewer.page, image_cameras=(key,))
    out = tmp_path / "a" / "b" / "site"
    with pytest.raises(InvalidInput, match="cannot name a folder"):
        write_site(viewer, out)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.rglob("*")) == []


def test_an_open_page_gets_a_clear_conflict_after_an_edit_in_place(viewer_dataset, tmp_path):
    """A page opened before `delete-episodes` swapped the folder would play other episodes'
    videos under its old episode list: the server says the dataset changed instead."""
    import shutil

    from rlctl.adapters.memory.progress import SilentProgress
    from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
    from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
    from rlctl.application.use_cases.delete_episodes import DeleteEpisodes

    root = tmp_path / "ds"
    shutil.copytree(viewer_dataset, root)
    with ViewerServer(open_viewer(root)) as server:
        response, body = get(server, f"/media/{VIDEO}")
        assert response.status == 200 and body[4:8] == b"ftyp"
        DeleteEpisodes(
            LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress()
        )(str(root), "0")
        response, body = get(server, f"/media/{VIDEO}")
    assert response.status == 409
    assert b"changed while it was open" in body and b"open it again" in body
