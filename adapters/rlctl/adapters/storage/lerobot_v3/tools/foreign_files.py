"""What a dataset folder holds besides the dataset, carried into the folder that replaces it.

An edit in place builds a new dataset beside the old one and swaps it in. The LeRobot layout
owns `meta/`'s info, stats, tasks and episodes files, the numbered data and video files
(`chunk-XXX/file-YYY`), and `images/` (LeRobot's temporary frames); rlctl owns its lock, journal
and temporary names. Everything else is the user's — the Hub card README.md, notes, other
folders, a dataset split into `ROOT/sub` (or into `ROOT/data/train`) — and goes into the new
folder untouched:
files as hard links (no copy, however big), folders rebuilt around them, symbolic links as links
(never followed). A card whose counts describe the dataset gets the new ones.

Linking happens before the swap, so at every instant the dataset's path holds the user's files.
Whatever appears in the old folder between the linking and the swap is moved over after it.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from pathlib import Path

import attrs
import structlog

from rlctl.adapters.storage.dataset_lock import LOCK_NAME
from rlctl.adapters.storage.lerobot_v3.atomic_files import write_atomic
from rlctl.adapters.storage.lerobot_v3.leftovers import STAGING_DIR, is_temporary
from rlctl.adapters.storage.lerobot_v3.tools.edit_journal import JOURNAL_NAME

log = structlog.get_logger(__name__)

CARD_NAME = "README.md"
# meta/ files of the layout, this version's and the older ones a conversion reads.
_META_FILES = frozenset(
    {
        "info.json",
        "stats.json",
        "tasks.parquet",
        "tasks.jsonl",
        "episodes.jsonl",
        "episodes_stats.jsonl",
    }
)
# Folders whose files the layout names (by these patterns); anything else in them is the user's.
_NUMBERED = ("data", "videos", "meta/episodes")
_LAYOUT_FILE = re.compile(r"^(file-\d+|episode_\d+)\.(parquet|mp4)$")
# rlctl's own names at the top, and LeRobot's temporary frames (`images/`).
_OWNED_TOP = frozenset({LOCK_NAME, STAGING_DIR, JOURNAL_NAME, "images"})
# Link errors after which the file is copied instead (another disk, no hard links there).
_CANNOT_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP)


def foreign_entries(root: Path) -> list[str]:
    """Paths (relative to `root`, POSIX) of the entries the dataset's layout does not own, each
    as high up as it goes: a top-level name, a name in meta/, or a file or folder inside
    data/, videos/ or meta/episodes/ that is not one of the layout's numbered files (a dataset
    nested there is one entry)."""
    found = []
    for entry in _entries(root):
        name = entry.name
        if name in _OWNED_TOP or is_temporary(name):
            continue
        if entry.is_dir(follow_symlinks=False) and name in ("data", "videos"):
            found += _foreign_inside(root / name, f"{name}/")
        elif entry.is_dir(follow_symlinks=False) and name == "meta":
            for inner in _entries(root / "meta"):
                if inner.name in _META_FILES or is_temporary(inner.name):
                    continue
                if inner.name == "episodes" and inner.is_dir(follow_symlinks=False):
                    found += _foreign_inside(root / "meta/episodes", "meta/episodes/")
                else:
                    found.append(f"meta/{inner.name}")
        else:
            found.append(name)
    return found


def _foreign_inside(folder: Path, prefix: str) -> list[str]:
    found = []
    for entry in _entries(folder):
        name = f"{prefix}{entry.name}"
        if is_temporary(entry.name):
            continue
        if entry.is_dir(follow_symlinks=False):
            if (folder / entry.name / "meta" / "info.json").is_file():
                found.append(name)  # a dataset of its own, written there
            else:
                found += _foreign_inside(folder / entry.name, f"{name}/")
        elif not _LAYOUT_FILE.match(entry.name):
            found.append(name)
    return found


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    with os.scandir(folder) as entries:
        return sorted(entries, key=lambda e: e.name)


@attrs.define
class Carried:
    """The entries carried, and each linked file's (device, inode) as it was linked."""

    names: list[str] = attrs.field(factory=list)
    linked: dict[str, tuple[int, int]] = attrs.field(factory=dict)
    card_updated: bool = False

    def shown(self) -> tuple[str, ...]:
        return tuple(
            f"{name} (counts updated)" if name == CARD_NAME and self.card_updated else name
            for name in self.names
        )


def carry_foreign(old: Path, new: Path, card: str | None = None) -> Carried:
    """Link every foreign entry of `old` into `new`; `card` (when given) is written as
    README.md instead of linking the old one."""
    carried = Carried()
    for name in foreign_entries(old):
        source, target = old / name, new / name
        if target.exists() or target.is_symlink():
            continue  # the rebuild wrote it: the layout's own file wins
        target.parent.mkdir(parents=True, exist_ok=True)
        if name == CARD_NAME and card is not None and _is_plain_file(source):
            _write_like(source, target, card)
            carried.card_updated = True
        else:
            _carry(source, target, name, carried)
        carried.names.append(name)
    return carried


def settle_after_swap(old: Path, new: Path, carried: Carried) -> None:
    """Bring over what changed in the old folder's foreign entries between the linking and the
    swap (a file added, or replaced under its name): the old folder is about to go."""
    for name in carried.names:
        _settle(old / name, new / name, name, carried)
    for name in foreign_entries(old):
        if name not in carried.names and not (new / name).exists():
            _move(old / name, new / name)


def _settle(source: Path, target: Path, name: str, carried: Carried) -> None:
    try:
        info = source.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        if not target.is_dir() or target.is_symlink():
            return
        for child in os.scandir(source):
            _settle(source / child.name, target / child.name, f"{name}/{child.name}", carried)
        return
    linked = carried.linked.get(name)
    if linked is None:
        if not target.exists() and not target.is_symlink():
            _move(source, target)  # added after the linking
        return
    if (info.st_dev, info.st_ino) != linked and _unchanged(target, linked):
        _move(source, target)  # replaced in the old folder after the linking


def _unchanged(target: Path, linked: tuple[int, int]) -> bool:
    try:
        info = target.lstat()
    except FileNotFoundError:
        return True
    return (info.st_dev, info.st_ino) == linked


def _move(source: Path, target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        source.replace(target)
    except OSError as err:
        log.warning("could not carry a file over", path=str(source), error=str(err))


def _carry(source: Path, target: Path, name: str, carried: Carried) -> None:
    info = source.lstat()
    if stat.S_ISLNK(info.st_mode):
        target.symlink_to(source.readlink())
    elif stat.S_ISDIR(info.st_mode):
        target.mkdir()
        for child in sorted(os.scandir(source), key=lambda e: e.name):
            _carry(source / child.name, target / child.name, f"{name}/{child.name}", carried)
        shutil.copystat(source, target, follow_symlinks=False)
    elif stat.S_ISREG(info.st_mode):
        try:
            os.link(source, target, follow_symlinks=False)
            carried.linked[name] = (info.st_dev, info.st_ino)
        except OSError as err:
            if err.errno not in _CANNOT_LINK:
                raise
            shutil.copy2(source, target, follow_symlinks=False)
    else:
        log.warning("not carried over: neither a file, a folder nor a link", path=str(source))


def _write_like(source: Path, target: Path, text: str) -> None:
    write_atomic(target, lambda temp: temp.write_text(text, encoding="utf-8"), durable=False)
    shutil.copymode(source, target)


def _is_plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()
