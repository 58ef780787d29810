"""The dataset viewer written as static files: the served page, to open from disk or to host.

The layout mirrors the server's routes (`index.html`, `static/`, `data/*.json`, `media/...`,
`frames/...`), so the page is the same file in both cases. Browsers refuse `fetch()` of `file://`
URLs, so each JSON file has a `.js` twin that the page loads with a script tag when opened from
disk. Video files are hard-linked (copied across file systems), never re-encoded; pictures of
cameras stored as images are written one file per frame.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlctl.adapters.viewer.server import STATIC_FILES, static_asset
from rlctl.application.use_cases.view_dataset import DatasetViewer
from rlctl.domain.errors import InvalidInput


def _write_data(folder: Path, name: str, data: Any) -> None:
    text = json.dumps(data, separators=(",", ":"))
    (folder / f"{name}.json").write_text(text, encoding="utf-8")
    # `</` cannot end the script early: JSON allows the escaped slash.
    safe = text.replace("</", "<\\/")
    script = f"(window.rlctlData=window.rlctlData||{{}})[{json.dumps(name)}]={safe};\n"
    (folder / f"{name}.js").write_text(script, encoding="utf-8")


def _place(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def write_site(
    viewer: DatasetViewer,
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
    (out / "static").mkdir(parents=True, exist_ok=True)
    (out / "data").mkdir(exist_ok=True)
    (out / "index.html").write_bytes(static_asset("index.html"))
    for name in STATIC_FILES:
        if name != "index.html":
            (out / "static" / name).write_bytes(static_asset(name))
    _write_data(out / "data", "dataset", viewer.page.to_dict())
    root = Path(viewer.root)
    for summary in viewer.page.episodes:
        episode = viewer.episode(summary.index)
        _write_data(out / "data", f"episode-{summary.index}", episode.to_dict())
        for clip in episode.videos:
            _place(root / clip.file, out / "media" / clip.file)
        for key in viewer.page.image_cameras:
            folder = out / "frames" / str(summary.index) / key
            folder.mkdir(parents=True, exist_ok=True)
            for frame in range(summary.length):
                (folder / str(frame)).write_bytes(viewer.frame_image(summary.index, key, frame))
        if on_episode is not None:
            on_episode(summary.index)
    return out / "index.html"
