"""Damage declared by a test: a file is damaged while it holds the bytes it had when declared.

What fetching a file again does to a real copy (new bytes, the damage gone) it does here too, and a
Hub holding the same bad bytes leaves the file damaged, so the repair policy of `PullDataset` can
be tested on the in-memory Hub without a real dataset format.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

from rlctl.application.ports.hub import DamagedFile, RecordedFile


class DeclaredIntegrity:
    def __init__(self) -> None:
        # (root, repo path) -> the bytes that make it damaged (None: damaged while missing).
        self.declared: dict[tuple[Path, str], bytes | None] = {}
        self.replaced: list[str] = []

    def declare(self, root: Path, path: str) -> None:
        file = Path(root) / path
        self.declared[(Path(root), path)] = file.read_bytes() if file.is_file() else None

    def damaged_files(self, root: Path, episodes: Sequence[int] | None = None) -> list[DamagedFile]:
        found = []
        for (where, path), bad in self.declared.items():
            file = where / path
            now = file.read_bytes() if file.is_file() else None
            if where == Path(root) and now == bad:
                found.append(DamagedFile(path, "missing" if bad is None else "damaged"))
        meta = [d for d in found if d.path.startswith("meta/")]
        return meta or found

    def differing_files(
        self, root: Path, recorded: Sequence[RecordedFile], *, trust_cache: bool = True
    ) -> list[DamagedFile]:
        """Every byte compared, always: the memory Hub's files are small."""
        found = []
        for entry in recorded:
            file = Path(root) / entry.path
            if not file.is_file():
                found.append(DamagedFile(entry.path, "missing"))
                continue
            content = file.read_bytes()
            if entry.sha256 is not None:
                same = hashlib.sha256(content).hexdigest() == entry.sha256
            else:
                blob = b"blob %d\0" % len(content) + content
                same = hashlib.sha1(blob).hexdigest() == entry.git_sha1
            if not same:
                found.append(DamagedFile(entry.path, "not the Hub's bytes"))
        return found

    def replace_files(self, root: Path, names: Sequence[str], source: Path) -> None:
        for name in names:
            target = Path(root) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(source) / name, target)
            self.replaced.append(name)
