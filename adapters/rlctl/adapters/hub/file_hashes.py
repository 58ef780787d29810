"""Comparing the files of a local copy with what the Hub records of them, by size and hash.

The Hub records the sha256 of each LFS file's content (LeRobot's parquet and mp4 files) and the
git blob id (sha1 of `blob <size>\\0` + bytes) of every file. One streamed read gives both, so a
file is read once whatever the Hub recorded, in blocks (never whole in memory).

Hashing a dataset reads every byte, so hashes are kept in a small state file rlctl owns (one per
dataset folder, outside it: nothing is added to the dataset), keyed by what any write changes:
device, inode, size, modification and change time. `utime` can put a modification time back,
never a change time, so a file rewritten since it was hashed is hashed again. Damage no write
makes (a failing disk) is what a read that failed asks for: then nothing is trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import attrs

from rlctl.application.ports.hub import DamagedFile, RecordedFile

BLOCK = 1 << 20
STATE_VERSION = 1


@attrs.frozen
class FileHashes:
    size: int
    sha256: str
    git_sha1: str


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def hash_file(path: Path) -> tuple[FileHashes, os.stat_result]:
    """Both hashes of a regular file (links followed), streamed; raises OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        sha256 = hashlib.sha256()
        sha1 = hashlib.sha1(b"blob %d\0" % info.st_size)
        read = 0
        while block := file.read(BLOCK):
            sha256.update(block)
            sha1.update(block)
            read += len(block)
    # A file that changed while read hashes as something the Hub never recorded: fetched again.
    return FileHashes(read, sha256.hexdigest(), sha1.hexdigest()), info


class HashState:
    """Hashes taken earlier of the files of one dataset folder, valid while untouched."""

    def __init__(self, state_dir: Path | None, root: Path) -> None:
        key = hashlib.sha1(str(Path(root).resolve()).encode()).hexdigest()[:20]
        self._path = None if state_dir is None else Path(state_dir) / f"{key}.json"
        self._entries: dict[str, list] = {}
        self._changed = False
        if self._path is not None:
            with contextlib.suppress(OSError, ValueError, TypeError):
                data = json.loads(self._path.read_text(encoding="utf-8"))
                if data.get("version") == STATE_VERSION and isinstance(data.get("files"), dict):
                    self._entries = data["files"]

    def get(self, name: str, info: os.stat_result) -> FileHashes | None:
        entry = self._entries.get(name)
        if not isinstance(entry, list) or len(entry) != 7 or entry[:5] != _identity(info):
            return None
        return FileHashes(info.st_size, str(entry[5]), str(entry[6]))

    def put(self, name: str, info: os.stat_result, hashes: FileHashes) -> None:
        self._entries[name] = [*_identity(info), hashes.sha256, hashes.git_sha1]
        self._changed = True

    def forget(self, name: str) -> None:
        self._changed |= self._entries.pop(name, None) is not None

    def save(self) -> None:
        """Best effort: a state that cannot be written only costs a hash next time."""
        if self._path is None or not self._changed:
            return
        with contextlib.suppress(OSError):
            self._path.parent.mkdir(parents=True, exist_ok=True)
            temp = self._path.with_name(f".{self._path.name}.{os.getpid()}.tmp")
            temp.write_text(json.dumps({"version": STATE_VERSION, "files": self._entries}))
            temp.replace(self._path)


def mismatch(hashes: FileHashes, recorded: RecordedFile) -> str | None:
    """How a local file's hashes differ from the Hub's record of it, None when they agree."""
    if recorded.sha256 is not None:
        if hashes.sha256 != recorded.sha256.lower():
            return f"its sha256 {hashes.sha256[:12]}… is not the Hub's {recorded.sha256[:12]}…"
        return None
    if recorded.git_sha1 is not None and hashes.git_sha1 != recorded.git_sha1.lower():
        return f"its git hash {hashes.git_sha1[:12]}… is not the Hub's {recorded.git_sha1[:12]}…"
    return None


def differing_files(
    root: Path,
    recorded: Sequence[RecordedFile],
    *,
    state_dir: Path | None,
    trust_cache: bool = True,
) -> list[DamagedFile]:
    """The recorded files whose copy under `root` is missing or not the Hub's bytes."""
    root = Path(root)
    state = HashState(state_dir, root)
    found: list[DamagedFile] = []
    try:
        for entry in recorded:
            problem = _problem(root, entry, state, trust_cache)
            if problem is not None:
                found.append(DamagedFile(entry.path, problem))
    finally:
        state.save()
    return found


def _problem(root: Path, entry: RecordedFile, state: HashState, trust_cache: bool) -> str | None:
    path = root / entry.path
    try:
        info = path.stat()
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return f"cannot be read: {error.strerror or error}"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if entry.size is not None and info.st_size != entry.size:
        state.forget(entry.path)
        return f"{info.st_size} bytes where the Hub's copy has {entry.size}"
    hashes = state.get(entry.path, info) if trust_cache else None
    if hashes is None:
        try:
            hashes, info = hash_file(path)
        except OSError as error:
            return f"cannot be read: {error.strerror or error}"
        state.put(entry.path, info, hashes)
    return mismatch(hashes, entry)
