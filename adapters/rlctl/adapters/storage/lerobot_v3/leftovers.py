"""What writers leave behind when they are killed, and removing it.

Every name rlctl's dataset writers use for work in progress (none of them is ever part of a
dataset, and `dataset push` never sends one):

- `ROOT/.rlctl-staging/`: episodes being encoded (recording), spans encoded anew (the edits);
- `.NAME.PID.rlctl-tmp` beside a file being replaced (`atomic_files`);
- `.STEM.partial-PID.mp4` beside a video being written or joined;
- `.ROOT.rlctl-edit-PID-N/` beside the dataset: the replacement an edit in place builds, and,
  once swapped, the original it is removing;
- `.ROOT.rlctl-old-PID/` beside the dataset: the original between the two renames of the swap
  used where the system cannot exchange two folders in one step.

`ROOT/.rlctl-lock` is the lock's own file (`dataset_lock`). Whoever takes the dataset's lock
removes what is left inside the dataset (only a writer holding that lock could be using it), and
the folders beside it whose process is gone and whose own lock is free (`remove_leftovers`).
Nothing inside a folder the LeRobot layout does not own (a nested dataset, the user's files) is
touched: another writer may own it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
from pathlib import Path

import structlog

from rlctl.adapters.storage.dataset_lock import LOCK_NAME
from rlctl.adapters.storage.lerobot_v3.atomic_files import TEMP_SUFFIX

log = structlog.get_logger(__name__)

STAGING_DIR = ".rlctl-staging"
# Folders of the LeRobot layout that writers fill: their temporary files are leftovers.
LAYOUT_DIRS = ("meta", "data", "videos", "images")
_PARTIAL_VIDEO = re.compile(r"^\..+\.partial-\d+\.mp4$")
_BESIDE = re.compile(r"^\.(?P<name>.+)\.rlctl-(?P<kind>edit|old)-(?P<pid>\d+)(?:-\d+)?$")


def edit_folder(root: Path, pid: int, number: int) -> Path:
    """Where an edit in place builds the replacement of `root` (and leaves the original)."""
    return root.with_name(f".{root.name}.rlctl-edit-{pid}-{number}")


def old_folder(root: Path, pid: int) -> Path:
    """Where the two-rename swap parks the original of `root` between its renames."""
    return root.with_name(f".{root.name}.rlctl-old-{pid}")


def is_temporary(name: str) -> bool:
    """A file name only a writer at work uses."""
    return name.endswith(TEMP_SUFFIX) or bool(_PARTIAL_VIDEO.match(name))


def is_work_folder(name: str) -> bool:
    """A folder name an edit in place uses beside a dataset."""
    return bool(_BESIDE.match(name))


def process_is_gone(pid: int) -> bool:
    """True when no process `pid` runs on this host (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    except OverflowError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "Z"
    return False


def _lock_is_free(folder: Path) -> bool:
    """True unless a live writer holds the flock of `folder`'s lock file."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    finally:
        os.close(fd)
    return True


def leftovers_inside(root: Path) -> list[Path]:
    """The staging folder and the temporary files in the layout's folders (and at the top)."""
    found: list[Path] = []
    staging = root / STAGING_DIR
    if staging.is_dir() and not staging.is_symlink():
        found.append(staging)
    with contextlib.suppress(OSError):
        found += [p for p in root.iterdir() if is_temporary(p.name) and _is_plain_file(p)]
    for name in LAYOUT_DIRS:
        folder = root / name
        if not folder.is_dir() or folder.is_symlink():
            continue
        for current, _, files in os.walk(folder):
            found += [Path(current, f) for f in files if is_temporary(f)]
    return found


def leftovers_beside(root: Path) -> list[Path]:
    """Edit folders beside `root` whose process is gone and whose lock is free."""
    found = []
    with contextlib.suppress(OSError):
        for path in root.parent.iterdir():
            match = _BESIDE.match(path.name)
            if match is None or match["name"] != root.name:
                continue
            if path.is_symlink() or not path.is_dir():
                continue
            if process_is_gone(int(match["pid"])) and _lock_is_free(path):
                found.append(path)
    return sorted(found)


def _kind(path: Path) -> str | None:
    match = _BESIDE.match(path.name)
    return match["kind"] if match else None


def _is_plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def restore_interrupted_swap(root: Path) -> Path | None:
    """Put back an original the two-rename swap parked beside `root` when it was killed
    between its renames (`root` is then missing); the folder it came from, or None."""
    root = root.resolve()  # a dataset reached through a link is edited where it really is
    if root.exists() or root.is_symlink():
        return None
    parked = [p for p in leftovers_beside(root) if _kind(p) == "old"]
    if len(parked) != 1:
        return None
    try:
        parked[0].rename(root)
    except OSError:
        return None
    log.warning(
        "put back the original dataset a killed edit had moved aside",
        root=str(root),
        moved_from=str(parked[0]),
    )
    return parked[0]


def remove_leftovers(root: Path) -> list[str]:
    """Remove what killed writers of `root` left; the caller holds `root`'s lock. Returns the
    paths removed."""
    removed: list[str] = []
    for path in [*leftovers_inside(root), *leftovers_beside(root.resolve())]:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as err:
            log.warning("could not remove a leftover", path=str(path), error=str(err))
            continue
        removed.append(str(path))
    return removed
