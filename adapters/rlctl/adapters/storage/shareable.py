"""Which files of a local folder may leave it (a push to the Hub): the folder's own files only.

Never: rlctl's work in progress (a killed writer's staging folder and temporary files, an edit's
folders, the lock, the edit journal — `lerobot_v3.leftovers`), nor what a symbolic link points
at outside the folder (a link could send any file of the machine). Links that stay inside the
folder are followed, folders included (each real folder once).
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from rlctl.adapters.storage.dataset_lock import LOCK_NAME
from rlctl.adapters.storage.lerobot_v3.leftovers import STAGING_DIR, is_temporary, is_work_folder
from rlctl.adapters.storage.lerobot_v3.tools.edit_journal import JOURNAL_NAME
from rlctl.domain.errors import InvalidInput

_WORK_FILES = frozenset({LOCK_NAME, JOURNAL_NAME})


@attrs.frozen
class FolderFiles:
    """`files`: relative POSIX paths of the regular files that may be sent; `outside`: paths
    that are (or lie under) links leading out of the folder, with where they lead."""

    files: tuple[str, ...]
    outside: dict[str, str]


def folder_files(folder: Path) -> FolderFiles:
    root = folder.resolve()
    files: list[str] = []
    outside: dict[str, str] = {}
    seen: set[Path] = set()

    def walk(real: Path, shown: str) -> None:
        if real in seen:
            return
        seen.add(real)
        with os.scandir(real) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                name = f"{shown}{entry.name}"
                if _is_work(entry.name, entry.is_dir(follow_symlinks=False)):
                    continue
                target = Path(entry.path).resolve()
                if entry.is_symlink() and not target.is_relative_to(root):
                    outside[name] = str(target)
                elif target.is_dir():
                    walk(target, f"{name}/")
                elif target.is_file():
                    files.append(name)

    walk(root, "")
    return FolderFiles(tuple(files), outside)


def _is_work(name: str, is_dir: bool) -> bool:
    if is_dir:
        return name == STAGING_DIR or is_work_folder(name)
    return name in _WORK_FILES or is_temporary(name)


def refuse_outside(
    selected: list[str], found: FolderFiles, folder: Path, allow: tuple[str, ...] | None = None
) -> None:
    """Raise when a selected path (or a file `allow` names exactly) leads out of `folder`
    through a link."""
    wanted = [*selected, *(p for p in allow or () if not any(c in p for c in "*?["))]
    bad = [
        (name, target)
        for name, target in found.outside.items()
        if any(w == name or w.startswith(f"{name}/") for w in wanted)
    ]
    if bad:
        shown = "; ".join(f"{name} -> {target}" for name, target in bad[:3])
        raise InvalidInput(
            f"{len(bad)} path(s) to send are symbolic links leading out of the folder: {shown}",
            where=str(folder),
            hint="rlctl sends only the folder's own files: copy the file into the folder in "
            "place of the link (or remove the link), then push again",
        )
