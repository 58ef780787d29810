"""Replacing files so that a reader, or a process killed midway, sees the old file or the new one.

Every file the writer changes is first written whole under a temporary name in the same folder,
flushed to the disk, then renamed over the old one (`os.replace` is atomic on POSIX). Temporary
names end in `.rlctl-tmp`, so an interrupted session's leftovers are easy to find and delete.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".rlctl-tmp"


def temp_path_for(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}{TEMP_SUFFIX}")


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    # Makes the rename itself durable; some filesystems refuse to sync a folder, which is harmless.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def publish(temp: Path, path: Path, durable: bool = True) -> None:
    """Move a fully written `temp` over `path` in one step."""
    if durable:
        fsync_file(temp)
    temp.replace(path)
    if durable:
        fsync_dir(path.parent)


@contextlib.contextmanager
def replacing(path: Path, durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces `path`, on error it is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path_for(path)
    try:
        yield temp
        publish(temp, path, durable)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, write: Callable[[Path], Any], durable: bool = True) -> None:
    with replacing(path, durable) as temp:
        write(temp)


def write_json_atomic(path: Path, content: Any, durable: bool = True) -> None:
    """JSON as LeRobot writes it: four-space indent, non-ASCII kept."""
    text = json.dumps(content, indent=4, ensure_ascii=False)
    write_atomic(path, lambda temp: temp.write_text(text, encoding="utf-8"), durable)


class StagedReplace:
    """Several files written under temporary names first, then renamed over their targets back to
    back: the slow part (writing, flushing) is over before the first rename, so a crash finds
    all of them old, all new, or (for the microseconds between two renames) the first ones new.
    """

    def __init__(self, durable: bool = True) -> None:
        self._durable = durable
        self._moves: list[tuple[Path, Path]] = []

    def stage(self, path: Path, write: Callable[[Path], Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = temp_path_for(path)
        try:
            write(temp)
            if self._durable:
                fsync_file(temp)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self._moves.append((temp, path))

    def stage_json(self, path: Path, content: Any) -> None:
        text = json.dumps(content, indent=4, ensure_ascii=False)
        self.stage(path, lambda temp: temp.write_text(text, encoding="utf-8"))

    def publish(self) -> None:
        """Rename every staged file over its target, in the order staged."""
        for temp, path in self._moves:
            temp.replace(path)
        if self._durable:
            for folder in dict.fromkeys(path.parent for _, path in self._moves):
                fsync_dir(folder)
        self._moves.clear()

    def discard(self) -> None:
        for temp, _ in self._moves:
            temp.unlink(missing_ok=True)
        self._moves.clear()


def remove_temp_files(root: Path) -> list[Path]:
    """Delete the temporary files an interrupted session left under `root`."""
    removed = []
    for temp in root.rglob(f"*{TEMP_SUFFIX}"):
        if temp.is_file():
            temp.unlink(missing_ok=True)
            removed.append(temp)
    return removed
