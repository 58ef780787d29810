"""The dataset viewer in a real browser: Debian's chromium, headless, driven by playwright.

Every camera frame of the test dataset is a flat colour naming its episode and frame (see
conftest), so reading a pixel of the shown video tells whether the page shows the frame its
cursor says. A screenshot is kept under `test-artifacts/viewer/` (git-ignored).

Every page lives in a browser context that a fixture closes in `finally`, every wait has a
timeout, and chromium runs with the flags that keep it from reaching for the network (see
`CHROMIUM_ARGS`): a failing test leaves no tab, context, browser or server behind.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlctl.adapters.storage.lerobot_v3.episode_data import LeRobotEpisodeData
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.viewer.server import ViewerServer
from rlctl.application.use_cases.view_dataset import ViewDataset

# Each test takes seconds; the first of the module also starts chromium and writes the dataset.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
# Headless, and nothing in the background: without these chromium keeps opening connections
# this machine's closed network refuses, many at a time, and spins on a loaded machine.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--mute-audio",
]
# Any single browser action or wait: far above what it takes, far below the test's limit.
ACTION_TIMEOUT_MS = 20_000

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "viewer"
FRONT = "observation.images.front"
# Lossy AV1 keeps a flat colour within a few levels.
TOLERANCE = 12
CHART_GEOMETRY = """(svg) => ({
  width: svg.viewBox.baseVal.width, left: Number(svg.dataset.left),
  plotWidth: Number(svg.dataset.plotWidth), x0: Number(svg.dataset.x0), x1: Number(svg.dataset.x1),
})"""

PIXEL = """(key) => {
  const v = document.querySelector(`video[data-key="${key}"]`);
  const c = document.createElement("canvas");
  c.width = v.videoWidth; c.height = v.videoHeight;
  const g = c.getContext("2d");
  g.drawImage(v, 0, 0);
  return Array.from(g.getImageData(c.width >> 1, c.height >> 1, 1, 1).data.slice(0, 3));
}"""
SETTLED = """() => [...document.querySelectorAll("video")]
  .every(v => !v.seeking && v.readyState >= 2)"""


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    return found


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev dependency")
    executable = chromium_path()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            yield launched
        finally:
            launched.close()


@contextlib.contextmanager
def new_tab(browser, url: str, errors: list[str]) -> Iterator:
    """A page at `url` in a context of its own, closed however the block ends."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        context.set_default_timeout(ACTION_TIMEOUT_MS)
        context.set_default_navigation_timeout(ACTION_TIMEOUT_MS)
        tab = context.new_page()
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto(url)
        yield tab
    finally:
        context.close()


@contextlib.contextmanager
def open_viewer(browser, root: Path, fragment: str = "", reader=None) -> Iterator:
    """A page on a served dataset; closes both however the block ends, then (when the block
    succeeded) checks the page raised no script error."""
    viewer = ViewDataset(LeRobotMetaReader(), reader or LeRobotEpisodeData())(str(root))
    errors: list[str] = []
    with ViewerServer(viewer) as server, new_tab(browser, server.url + fragment, errors) as tab:
        yield tab
    assert not errors, errors


@pytest.fixture(scope="module")
def page(browser, viewer_dataset):
    with open_viewer(browser, viewer_dataset) as tab:
        tab.wait_for_selector("body[data-ready='0']", timeout=15_000)
        yield tab


def shown_colour(page, key: str = FRONT) -> list[int]:
    page.wait_for_function(SETTLED)
    return page.evaluate(PIXEL, key)


def assert_shows(page, colour, episode: int, frame: int, *, within_s: float = 10.0) -> None:
    """Each camera shows the frame within `within_s`: a seek's end ("seeked") can come before
    the browser hands the new picture to a canvas, later on a loaded machine. `within_s=0`
    reads once, for a caller that already waited for the frame to be shown."""
    for key in (FRONT, "observation.images.wrist"):
        want = colour(episode, frame)
        deadline = time.monotonic() + within_s
        while True:
            got = shown_colour(page, key)
            if all(abs(g - w) <= TOLERANCE for g, w in zip(got, want)):
                break
            assert time.monotonic() < deadline, (key, got, want)
            page.wait_for_timeout(50)


def select(page, episode: int) -> None:
    page.click(f"#episodes li[data-episode='{episode}']")
    page.wait_for_selector(f"body[data-ready='{episode}']", timeout=15_000)


def test_the_list_shows_every_episode_and_filters(page):
    items = page.locator("#episodes li")
    assert items.count() == 3
    assert [items.nth(i).get_attribute("data-episode") for i in range(3)] == ["0", "1", "2"]
    assert "12 frames" in items.nth(1).inner_text() and "task 1" in items.nth(1).inner_text()
    page.fill("#filter", "task 1")
    assert [items.nth(i).is_visible() for i in range(3)] == [False, True, False]
    assert page.inner_text("#count") == "1 of 3 episodes"
    page.fill("#filter", "")
    assert all(items.nth(i).is_visible() for i in range(3))


def test_an_episode_starts_at_its_own_place_in_the_shared_video(page, colour_of):
    select(page, 1)
    assert page.evaluate("rlctlViewer.frame()") == 0
    assert_shows(page, colour_of, episode=1, frame=0)
    assert page.locator(".plot").count() == 2
    legend = page.inner_text(".plot[data-key='action'] .legend")
    assert all(name in legend for name in ("shoulder", "elbow", "wrist", "gripper"))
    # The server draws each chart: a line per dimension, and a cursor the page moves.
    lines = page.locator(".plot[data-key='action'] svg polyline.series")
    assert lines.count() == 4
    cursor = page.locator(".plot[data-key='action'] svg line.cursor")
    assert cursor.get_attribute("visibility") == "visible"


def test_the_video_plays_and_the_cursor_follows_it(page, colour_of):
    select(page, 1)
    before = float(page.get_attribute(".plot[data-key='observation.state']", "data-cursor-x"))
    page.keyboard.press("Space")
    page.wait_for_function("rlctlViewer.time() > 0.45", timeout=10_000)
    assert not page.evaluate(f"document.querySelector('video[data-key=\"{FRONT}\"]').paused")
    page.keyboard.press("Space")
    assert not page.evaluate("rlctlViewer.playing()")
    frame = page.evaluate("rlctlViewer.frame()")
    assert frame >= 4
    for key in ("observation.state", "action"):
        plot = page.locator(f".plot[data-key='{key}']")
        assert plot.get_attribute("data-cursor-frame") == str(frame)
        assert float(plot.get_attribute("data-cursor-x")) > before
    video = f"document.querySelector('video[data-key=\"{FRONT}\"]').currentTime"
    # Episode 1 starts at 1.0 s in the file; the video shows the cursor's frame.
    assert int((page.evaluate(video) - 1.0) * 10 + 1e-6) == frame
    assert_shows(page, colour_of, episode=1, frame=frame)


def test_playback_stops_at_the_end_of_the_episode_not_of_the_file(page, colour_of):
    select(page, 0)
    page.evaluate("rlctlViewer.seek(0.7)")
    page.keyboard.press("Space")
    page.wait_for_function("!rlctlViewer.playing()", timeout=10_000)
    assert page.evaluate("rlctlViewer.frame()") == 9
    assert_shows(page, colour_of, episode=0, frame=9)


def test_a_click_on_a_plot_seeks_the_videos(page, colour_of):
    select(page, 1)
    chart = page.locator(".plot[data-key='action'] svg")
    box = chart.bounding_box()
    # The chart says where its plot is, in its own units (scaled to the page's width).
    geometry = chart.evaluate(CHART_GEOMETRY)
    t = 0.55  # inside frame 5
    units = (
        geometry["left"]
        + (t - geometry["x0"]) / (geometry["x1"] - geometry["x0"]) * geometry["plotWidth"]
    )
    x = box["x"] + units * box["width"] / geometry["width"]
    page.mouse.click(x, box["y"] + box["height"] / 2)
    assert page.evaluate("rlctlViewer.frame()") == 5
    assert page.get_attribute(".plot[data-key='observation.state']", "data-cursor-frame") == "5"
    assert_shows(page, colour_of, episode=1, frame=5)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "episode-1-frame-5.png"))
    assert (ARTIFACTS / "episode-1-frame-5.png").stat().st_size > 10_000


def test_arrow_keys_step_one_frame(page, colour_of):
    select(page, 2)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("rlctlViewer.frame()") == 3
    assert_shows(page, colour_of, episode=2, frame=3)
    page.keyboard.press("ArrowLeft")
    assert page.evaluate("rlctlViewer.frame()") == 2
    assert_shows(page, colour_of, episode=2, frame=2)
    assert "frame 2 / 7" in page.inner_text("#clock")


def test_seeking_reports_when_the_frame_is_shown(page, colour_of):
    select(page, 1)
    elapsed = page.evaluate("rlctlViewer.seekAndWait(0.85)")
    assert 0 <= elapsed < 10_000
    assert page.evaluate("rlctlViewer.frame()") == 8
    assert_shows(page, colour_of, episode=1, frame=8, within_s=0)


@pytest.fixture(scope="module")
def image_page(browser, image_dataset):
    with open_viewer(browser, image_dataset, "#episode=1") as tab:
        tab.wait_for_selector("body[data-ready='1']", timeout=15_000)
        yield tab


PICTURE = """(key) => {
  const img = document.querySelector(`img[data-key="${key}"]`);
  const c = document.createElement("canvas");
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext("2d");
  g.drawImage(img, 0, 0);
  return Array.from(g.getImageData(c.width >> 1, c.height >> 1, 1, 1).data.slice(0, 3));
}"""


def test_cameras_stored_as_pictures_follow_the_cursor(image_page, colour_of):
    page = image_page
    settled = "() => [...document.querySelectorAll('img[data-key]')].every(i => i.complete)"
    page.wait_for_function(settled)
    assert page.evaluate(PICTURE, FRONT) == list(colour_of(1, 0))
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.wait_for_function(settled)
    assert page.evaluate("rlctlViewer.frame()") == 2
    for key in (FRONT, "observation.images.wrist"):
        assert page.evaluate(PICTURE, key) == list(colour_of(1, 2))
    page.keyboard.press("Space")
    page.wait_for_function("!rlctlViewer.playing()", timeout=10_000)
    page.wait_for_function(settled)
    assert page.evaluate("rlctlViewer.frame()") == 11
    assert page.evaluate(PICTURE, FRONT) == list(colour_of(1, 11))


def test_the_static_export_works_opened_from_disk(browser, viewer_dataset, tmp_path):
    from rlctl.adapters.viewer.site import write_site

    viewer = ViewDataset(LeRobotMetaReader(), LeRobotEpisodeData())(str(viewer_dataset))
    index = write_site(viewer, tmp_path / "site")
    errors: list[str] = []
    with new_tab(browser, index.as_uri() + "#episode=2", errors) as tab:
        tab.wait_for_selector("body[data-ready='2']", timeout=15_000)
        assert tab.locator("#episodes li").count() == 3
        tab.keyboard.press("ArrowRight")
        tab.wait_for_function(SETTLED)
        video = f"document.querySelector('video[data-key=\"{FRONT}\"]').currentTime"
        # Episode 2 starts after episodes 0 and 1 (22 frames at 10 fps) in the copied file.
        assert int((tab.evaluate(video) - 2.2) * 10 + 1e-6) == 1
    assert not errors, errors


class _ShortClips(LeRobotEpisodeData):
    """Episodes whose clips end 0.3 s before their data: `to_timestamp` must win."""

    def video_clips(self, location, episode_index):
        import attrs

        clips = super().video_clips(location, episode_index)
        return [attrs.evolve(clip, end_s=clip.end_s - 0.3) for clip in clips]


def test_playback_stops_at_the_clips_to_timestamp(browser, viewer_dataset, colour_of):
    with open_viewer(browser, viewer_dataset, "#episode=0", reader=_ShortClips()) as tab:
        tab.wait_for_selector("body[data-ready='0']", timeout=15_000)
        tab.keyboard.press("Space")
        tab.wait_for_function("!rlctlViewer.playing()", timeout=10_000)
        # Episode 0's clip now ends at 0.7 s: its last frame shown is frame 6.
        assert tab.evaluate("rlctlViewer.frame()") == 6
        assert_shows(tab, colour_of, episode=0, frame=6)


def test_a_dataset_in_the_hub_cache_plays(browser, hub_snapshot, colour_of):
    """Its files are links into the cache's blobs/: the videos play all the same."""
    with open_viewer(browser, hub_snapshot, "#episode=1") as tab:
        tab.wait_for_selector("body[data-ready='1']", timeout=15_000)
        assert_shows(tab, colour_of, episode=1, frame=0)
        tab.keyboard.press("ArrowRight")
        tab.keyboard.press("ArrowRight")
        assert tab.evaluate("rlctlViewer.frame()") == 2
        assert_shows(tab, colour_of, episode=1, frame=2)
