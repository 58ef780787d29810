"""A dataset laid out as huggingface_hub's cache keeps a downloaded repo, for the viewer's tests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def hub_cache_copy(dataset: Path, cache: Path, repo: str = "datasets--alice--sim") -> Path:
    """`dataset` laid out as huggingface_hub's cache keeps a downloaded repo: each file's bytes
    in `<cache>/<repo>/blobs/<sha256>`, and the revision's folder `snapshots/<rev>/` made of
    relative links into it (`../../blobs/<sha256>`, one `../` more per folder level).
    Returns the snapshot folder, the dataset root a Hub download hands back."""
    revision = hashlib.sha1(repo.encode()).hexdigest()
    blobs = cache / repo / "blobs"
    snapshot = cache / repo / "snapshots" / revision
    blobs.mkdir(parents=True)
    for file in sorted(dataset.rglob("*")):
        if not file.is_file():
            continue
        data = file.read_bytes()
        blob = blobs / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / file.relative_to(dataset)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (cache / repo / "refs").mkdir()
    (cache / repo / "refs" / "main").write_text(revision)
    return snapshot
