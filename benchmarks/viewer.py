"""The dataset viewer's speed, measured in a real browser (Debian's chromium, headless).

Writes a dataset with rlctl's own writer (50 episodes by default, two AV1 cameras sharing one
file each, LeRobot's encoding settings), then prints one JSON line:

- `interactive_ms`: from starting the server (the dataset's metadata read, the server
  listening) until the page has listed every episode, loaded the first episode's plots and
  can show its videos (`body[data-ready]`); a fresh browser context each time, median of
  `--repeat`. Goal: < 1000 ms.
- `seek_ms_*`: from asking the page to show a frame (`rlctlViewer.seekAndWait`) until every
  camera has presented it (`requestVideoFrameCallback`), over `--seeks` random frames of random
  episodes (the episode is chosen first, untimed). Goal: < 200 ms.

Usage:
    python benchmarks/viewer.py [--out DIR] [--episodes 50 --frames 60 --hw 96 --cams 2]
        [--repeat 5 --seeks 40] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def write_dataset(root: Path, episodes: int, frames: int, hw: int, cams: int) -> Path:
    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer

    names = [f"joint_{i}" for i in range(6)]
    features: dict = {
        "observation.state": {"dtype": "float32", "shape": [6], "names": names},
        "action": {"dtype": "float32", "shape": [6], "names": names},
    }
    keys = [f"observation.images.cam{c}" for c in range(cams)]
    for key in keys:
        features[key] = {
            "dtype": "video",
            "shape": [hw, hw, 3],
            "names": ["height", "width", "channels"],
        }
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:hw, 0:hw]
    session = LeRobotV3Writer().create(root, fps=30, features=features, robot_type="bench")
    for episode in range(episodes):
        for t in range(frames):
            frame = {
                "observation.state": rng.standard_normal(6).astype(np.float32),
                "action": rng.standard_normal(6).astype(np.float32),
                "task": f"task {episode % 3}",
            }
            for c, key in enumerate(keys):
                frame[key] = np.stack(
                    [
                        (xx + 3 * t + 17 * episode) % 256,
                        (yy + 2 * t + 31 * c) % 256,
                        (xx + yy) // 2 % 256,
                    ],
                    axis=-1,
                ).astype(np.uint8)
            session.add_frame(frame)
        session.save_episode()
    session.finalize()
    return root


def measure(root: Path, chromium: str, repeat: int, seeks: int) -> dict:
    from playwright.sync_api import sync_playwright

    from rlctl.adapters.storage.lerobot_v3.episode_data import LeRobotEpisodeData
    from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
    from rlctl.adapters.telemetry.logging import configure_logging
    from rlctl.adapters.viewer.server import ViewerServer
    from rlctl.application.use_cases.view_dataset import ViewDataset

    configure_logging("warning", "console")  # as `rlctl dataset view` does: no line per request
    interactive: list[float] = []
    seek_ms: list[float] = []
    rng = np.random.default_rng(1)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            headless=True,
            args=["--no-sandbox", "--headless", "--disable-dev-shm-usage"],
        )
        for attempt in range(repeat):
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            started = time.perf_counter()
            viewer = ViewDataset(LeRobotMetaReader(), LeRobotEpisodeData())(str(root))
            server = ViewerServer(viewer).start()
            try:
                page.goto(server.url)
                page.wait_for_selector("body[data-ready='0']", timeout=30_000)
                interactive.append((time.perf_counter() - started) * 1000)
                count = page.locator("#episodes li").count()
                assert count == len(viewer.page.episodes), count
                if attempt == 0:
                    for _ in range(seeks):
                        episode = int(rng.integers(len(viewer.page.episodes)))
                        length = viewer.page.episodes[episode].length
                        page.evaluate(f"rlctlViewer.selectEpisode({episode})")
                        page.wait_for_selector(f"body[data-ready='{episode}']", timeout=30_000)
                        frame = int(rng.integers(length))
                        fps = viewer.page.fps
                        seek_ms.append(page.evaluate(f"rlctlViewer.seekAndWait({frame / fps})"))
                        shown = page.evaluate("rlctlViewer.frame()")
                        assert shown == frame, (shown, frame)
            finally:
                server.stop()
                context.close()
        browser.close()
    return {
        "interactive_ms_median": round(statistics.median(interactive), 1),
        "interactive_ms_max": round(max(interactive), 1),
        "seek_ms_median": round(statistics.median(seek_ms), 1),
        "seek_ms_p95": round(float(np.percentile(seek_ms, 95)), 1),
        "seek_ms_max": round(max(seek_ms), 1),
        "repeat": repeat,
        "seeks": len(seek_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the dataset")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--hw", type=int, default=96)
    parser.add_argument("--cams", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seeks", type=int, default=40)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args()

    temporary = None
    if args.out is None:
        temporary = tempfile.TemporaryDirectory()
        args.out = Path(temporary.name)
    root = args.out / "viewer_bench"
    if not (root / "meta" / "info.json").is_file():
        shutil.rmtree(root, ignore_errors=True)
        write_dataset(root, args.episodes, args.frames, args.hw, args.cams)
    figures = measure(root, args.chromium, args.repeat, args.seeks)
    print(
        json.dumps(
            {
                "episodes": args.episodes,
                "frames_per_episode": args.frames,
                "cameras": args.cams,
                "hw": args.hw,
                **figures,
            }
        )
    )
    if temporary is not None:
        temporary.cleanup()


if __name__ == "__main__":
    main()
