"""The dataset viewer written as static files: the served page, to open from disk or to host.

The layout mirrors the server's routes (`index.html`, `static/`, `data/*.json`, `media/...`,
`frames/...`), so the page is the same file in both cases. Browsers refuse `fetch()` of `file://`
URLs, so each JSON file has a `.js` twin that the page loads with a script tag when opened from
disk. Video files are hard-linked (copied across file systems), never re-encoded; pictures of
cameras stored as images are written one file per frame. Every file written stays inside the
output folder, and every video read is one the server would serve (`media_path`), whatever the
dataset's metadata says.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlctl.adapters.viewer.charts import episode_data
from rlctl.adapters.viewer.server import STATIC_FILES, DatasetPages, media_path, static_asset
from rlctl.domain.errors import InvalidInput


def _write_data(folder: Path, name: str, data: Any) -> None:
    text = json.dumps(data, separators=(",", ":"))
    (folder / f"{name}.json").write_text(text, encoding="utf-8")
    # `</` cannot end the script early: JSON allows the escaped slash.
    safe = text.replace("</", "<\\/")
    script = f"(window.rlctlData=window.rlctlData||{{}})[{json.dumps(name)}]={safe};\n"
    (folder / f"{name}.js").write_text(script, encoding="utf-8")


def _video(root: Path, file: str, episode: int) -> Path:
    source = media_path(root, file)
    if source is None:
        raise InvalidInput(
            f"episode {episode}'s video {file!r} is missing or not a video file inside the dataset",
            where=str(root / file),
            hint=f"run `rlctl dataset check {root}` to see what is wrong with the dataset",
        )
    return source


def _folder_name(key: str, root: Path) -> str:
    """A camera's key as one folder name: never a path that leaves the output folder."""
    if not key or key in (".", "..") or any(c in key for c in "/\\\x00"):
        raise InvalidInput(
            f"the camera key {key!r} cannot name a folder",
            where=str(root / "meta" / "info.json"),
            hint="rename the feature (keys are names like observation.images.front)",
        )
    return key


def _place(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def write_site(
    viewer: DatasetPages,
    out: str | Path,
    *,
    on_episode: Callable[[int], None] | None = None,
) -> Path:
    """Write the page for every episode under `out` (created; must be empty if it exists)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InvalidInput(
            "the output folder is not empty",
            where=str(out),
            hint="give a new or empty folder to --out",
        )
    root = Path(viewer.root).resolve()
    image_cameras = [_folder_name(key, root) for key in viewer.page.image_cameras]
    (out / "static").mkdir(parents=True, exist_ok=True)
    (out / "data").mkdir(exist_ok=True)
    (out / "index.html").write_bytes(static_asset("index.html"))
    for name in STATIC_FILES:
        if name != "index.html":
            (out / "static" / name).write_bytes(static_asset(name))
    _write_data(out / "data", "dataset", viewer.page.to_dict())
    for summary in viewer.page.episodes:
        episode = viewer.episode(summary.index)
        _write_data(out / "data", f"episode-{summary.index}", episode_data(viewer.page, episode))
        for clip in episode.videos:
            # `media_path` accepted the name: a plain relative path, so the copy stays in out/.
            source = _video(root, clip.file, summary.index)
            _place(source, out / "media" / clip.file)
        for key in image_cameras:
            folder = out / "frames" / str(summary.index) / key
            folder.mkdir(parents=True, exist_ok=True)
            for frame in range(summary.length):
                (folder / str(frame)).write_bytes(viewer.frame_image(summary.index, key, frame))
        if on_episode is not None:
            on_episode(summary.index)
    return out / "index.html"
