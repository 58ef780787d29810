"""The viewer's server without a browser: range requests, the page's data, the static export."""

from __future__ import annotations

import http.client
import json
import re
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.storage.lerobot_v3.episode_data import LeRobotEpisodeData
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.viewer.server import ViewerServer, parse_range
from rlctl.adapters.viewer.site import write_site
from rlctl.application.use_cases.view_dataset import ViewDataset

VIDEO = "videos/observation.images.front/chunk-000/file-000.mp4"


@pytest.fixture(scope="module")
def viewer(viewer_dataset):
    return ViewDataset(LeRobotMetaReader(), LeRobotEpisodeData())(str(viewer_dataset))


@pytest.fixture(scope="module")
def server(viewer):
    with ViewerServer(viewer) as running:
        yield running


def request(server, path: str, headers: dict | None = None, method: str = "GET"):
    host, port = server.url.removeprefix("http://").rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request(method, path, headers=headers or {})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response, body


def test_a_range_request_returns_206_and_exactly_those_bytes(server, viewer_dataset):
    data = (viewer_dataset / VIDEO).read_bytes()
    response, body = request(server, f"/media/{VIDEO}", {"Range": "bytes=100-1099"})
    assert response.status == 206
    assert body == data[100:1100]
    assert response.getheader("Content-Range") == f"bytes 100-1099/{len(data)}"
    assert response.getheader("Accept-Ranges") == "bytes"
    assert response.getheader("Content-Type") == "video/mp4"


def test_open_ended_and_suffix_ranges(server, viewer_dataset):
    data = (viewer_dataset / VIDEO).read_bytes()
    response, body = request(server, f"/media/{VIDEO}", {"Range": "bytes=500-"})
    assert response.status == 206 and body == data[500:]
    response, body = request(server, f"/media/{VIDEO}", {"Range": "bytes=-64"})
    assert response.status == 206 and body == data[-64:]
    response, body = request(server, f"/media/{VIDEO}", {"Range": f"bytes=0-{len(data) * 2}"})
    assert response.status == 206 and body == data


def test_no_range_is_the_whole_file_and_a_range_past_the_end_is_416(server, viewer_dataset):
    data = (viewer_dataset / VIDEO).read_bytes()
    response, body = request(server, f"/media/{VIDEO}")
    assert response.status == 200 and body == data
    response, _ = request(server, f"/media/{VIDEO}", {"Range": f"bytes={len(data)}-"})
    assert response.status == 416
    assert response.getheader("Content-Range") == f"bytes */{len(data)}"
    response, body = request(server, f"/media/{VIDEO}", {"Range": "bytes=0-9"}, method="HEAD")
    assert response.status == 206 and response.getheader("Content-Length") == "10"


def test_only_video_files_inside_the_dataset_are_served(server):
    assert request(server, "/media/meta/info.json")[0].status == 404
    assert request(server, "/media/../../etc/passwd")[0].status == 404
    assert request(server, "/media/videos/nope.mp4")[0].status == 404
    assert request(server, "/static/../server.py")[0].status == 404


def test_the_page_and_its_assets_are_served(server):
    response, body = request(server, "/")
    assert response.status == 200 and b'src="static/viewer.js"' in body
    for name, kind in (("viewer.js", "text/javascript"), ("viewer.css", "text/css")):
        response, body = request(server, f"/static/{name}")
        assert response.status == 200 and response.getheader("Content-Type").startswith(kind)
        assert len(body) > 1000


def test_dataset_json_lists_every_episode_and_names_every_line(server):
    response, body = request(server, "/data/dataset.json")
    assert response.getheader("Content-Type") == "application/json"
    page = json.loads(body)
    assert [e["index"] for e in page["episodes"]] == [0, 1, 2]
    assert [e["length"] for e in page["episodes"]] == [10, 12, 8]
    assert page["episodes"][1]["tasks"] == ["task 1"]
    assert page["cameras"] == ["observation.images.front", "observation.images.wrist"]
    groups = {g["key"]: g for g in page["groups"]}
    assert list(groups) == ["observation.state", "action"]
    assert groups["action"]["names"] == ["shoulder", "elbow", "wrist", "gripper"]


def test_episode_json_holds_the_recorded_values_and_the_clip_spans(server):
    _, body = request(server, "/data/episode-1.json")
    episode = json.loads(body)
    assert episode["length"] == 12 and len(episode["timestamps"]) == 12
    t = np.arange(12) / 10
    state = np.array(episode["series"]["observation.state"])  # (dims, frames)
    np.testing.assert_allclose(state[2], np.sin(t + 2), atol=1e-5)
    np.testing.assert_allclose(episode["series"]["action"][0], np.sin(t) + 0.1, atol=1e-5)
    # Episode 1 follows episode 0's ten frames in the shared file.
    clips = {c["key"]: c for c in episode["videos"]}
    assert clips["observation.images.front"]["file"] == VIDEO
    assert clips["observation.images.front"]["start_s"] == pytest.approx(1.0)
    assert clips["observation.images.front"]["end_s"] == pytest.approx(2.2)
    assert request(server, "/data/episode-7.json")[0].status == 404


def test_episode_json_holds_a_chart_per_plot_group_drawn_by_the_report_charts(server):
    _, body = request(server, "/data/episode-1.json")
    charts = json.loads(body)["charts"]
    assert set(charts) == {"observation.state", "action"}
    chart = charts["action"]
    lines = re.findall(
        r'<polyline points="([^"]*)"[^>]*class="series" data-name="([^"]*)"', chart["svg"]
    )
    assert [name for _, name in lines] == ["shoulder", "elbow", "wrist", "gripper"]
    assert all(len(points.split()) == 12 for points, _ in lines)
    assert len(chart["colours"]) == 4 and len(set(chart["colours"])) == 4
    assert 'class="cursor"' in chart["svg"]
    x1 = re.search(r'data-x1="([^"]+)"', chart["svg"])
    assert x1 is not None and float(x1.group(1)) == pytest.approx(1.1)  # the last timestamp


def test_pictures_of_image_cameras_are_served_frame_by_frame(image_dataset, colour_of):
    from io import BytesIO

    from PIL import Image

    viewer = ViewDataset(LeRobotMetaReader(), LeRobotEpisodeData())(str(image_dataset))
    assert viewer.page.cameras == ()
    assert viewer.page.image_cameras == ("observation.images.front", "observation.images.wrist")
    with ViewerServer(viewer) as server:
        response, body = request(server, "/frames/2/observation.images.wrist/5")
        assert response.status == 200 and response.getheader("Content-Type") == "image/png"
        picture = np.asarray(Image.open(BytesIO(body)).convert("RGB"))
        assert tuple(picture[16, 16]) == colour_of(2, 5)  # PNG is lossless
        assert request(server, "/frames/2/observation.images.wrist/8")[0].status == 404
        assert request(server, "/frames/0/observation.state/0")[0].status == 404
        _, body = request(server, "/data/dataset.json")
        assert json.loads(body)["image_cameras"] == list(viewer.page.image_cameras)


def test_parse_range():
    assert parse_range(None, 100) is None
    assert parse_range("bytes=0-0", 100) == (0, 0)
    assert parse_range("bytes=90-200", 100) == (90, 99)
    assert parse_range("bytes=-10", 100) == (90, 99)
    assert parse_range("bytes=0-1,5-6", 100) is None  # several ranges: the whole file
    for bad in ("bytes=100-", "bytes=5-4", "bytes=-0"):
        with pytest.raises(ValueError):
            parse_range(bad, 100)


def test_the_static_export_holds_the_page_the_data_and_the_videos(viewer, viewer_dataset, tmp_path):
    index = write_site(viewer, tmp_path / "site")
    site = index.parent
    assert (site / "static" / "viewer.js").is_file() and (site / "static" / "viewer.css").is_file()
    page = json.loads((site / "data" / "dataset.json").read_text())
    assert len(page["episodes"]) == 3
    for i in range(3):
        episode = json.loads((site / "data" / f"episode-{i}.json").read_text())
        assert episode["index"] == i
        script = (site / "data" / f"episode-{i}.js").read_text()
        assert script.startswith("(window.rlctlData=") and f'"episode-{i}"' in script
    copied = site / "media" / VIDEO
    assert copied.read_bytes() == (viewer_dataset / VIDEO).read_bytes()


def test_the_static_export_writes_each_picture_of_image_cameras(image_dataset, tmp_path):
    viewer = ViewDataset(LeRobotMetaReader(), LeRobotEpisodeData())(str(image_dataset))
    site = write_site(viewer, tmp_path / "site").parent
    pictures = sorted((site / "frames").rglob("*"))
    files = [p for p in pictures if p.is_file()]
    assert len(files) == 2 * (10 + 12 + 8)
    assert (site / "frames/1/observation.images.front/11").read_bytes().startswith(b"\x89PNG")


def test_the_static_export_refuses_a_folder_with_content(viewer, tmp_path):
    from rlctl.domain.errors import InvalidInput

    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(InvalidInput, match="not empty"):
        write_site(viewer, tmp_path)
    assert Path(tmp_path / "keep.txt").read_text() == "mine"
