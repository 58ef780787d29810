"""One writer at a time per dataset: an exclusive lock on the dataset root.

Two `rlctl record --resume=true` on one folder would both append "episode 10" and one of them
would be lost without a word. So every writer (recording and resume, the tools that edit a dataset
in place, a pull that fills a folder) holds `ROOT/.rlctl-lock` under `fcntl.flock` while it works.
The file's JSON body names the holder (pid, host, command, start time) so the second writer can
say who to wait for; it stops at once rather than queueing. Readers take no lock.

A writer killed with SIGKILL releases the flock with its last file descriptor (the kernel does
it), so the next writer takes over, says so, and removes what the killed one left behind: its
temporary files and staging folder, and an edit's half-built or half-removed folder beside the
dataset (`lerobot_v3.leftovers`). When the flock is still held but the named process
is gone from this host (a forked child kept the descriptor), the lock is stale too: it is
replaced by a new file. The file is unlinked on release while the flock is still held; a writer
that opened the old file meanwhile sees its inode is no longer the path's and tries again.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import attrs
import structlog

from rlctl.domain.errors import DatasetError

log = structlog.get_logger(__name__)

LOCK_NAME = ".rlctl-lock"
_MAX_BODY = 4096
_ATTEMPTS = 8


class DatasetLocked(DatasetError):
    """Another process is writing the dataset."""


@attrs.frozen
class LockHolder:
    """Who holds (or held) a dataset's lock, as its lock file says."""

    pid: int | None
    host: str
    command: str
    started: str

    @classmethod
    def me(cls, command: str | None) -> LockHolder:
        shown = command or " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) or "python"
        return cls(
            pid=os.getpid(),
            host=socket.gethostname(),
            command=shown[:300],
            started=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        )

    @classmethod
    def parse(cls, body: bytes) -> LockHolder | None:
        """The holder a lock file names; None for an empty or unreadable body (it is a
        stranger's file too: anything may be in it)."""
        try:
            data: Any = json.loads(body.decode("utf-8", errors="replace"))
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        pid = data.get("pid")
        return cls(
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None,
            host=str(data.get("host", "?"))[:200],
            command=str(data.get("command", "?"))[:300],
            started=str(data.get("started", "?"))[:64],
        )

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} ({self.command!r}, since {self.started})"

    def is_gone(self) -> bool:
        """True when the holder ran on this host and no such process exists any more."""
        if self.pid is None or self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # someone else's live process
        return False

    def body(self) -> bytes:
        return json.dumps(attrs.asdict(self)).encode()


class DatasetLock:
    """The exclusive write lock of one dataset root; `acquire` raises `DatasetLocked` at once
    when another writer holds it."""

    def __init__(self, root: str | Path, command: str | None = None) -> None:
        self.root = Path(root)
        self.path = self.root / LOCK_NAME
        self._command = command
        self._fd: int | None = None
        # The folder itself, not its path: an edit in place swaps another folder in at the path,
        # and the lock file to remove on release is the one in the folder that was locked.
        self._dir: int | None = None
        # What killed writers had left, removed when the lock was taken.
        self.removed: tuple[str, ...] = ()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> Self:
        if self._fd is not None:
            return self
        try:
            self._dir = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            for _ in range(_ATTEMPTS):
                taken = self._try_once()
                if taken is not None:
                    self._fd, previous = taken
                    self._clean_up(previous)
                    return self
        except OSError as err:
            self._close_dir()
            raise DatasetError(
                f"the dataset's lock file cannot be used: {err.strerror or err}",
                where=str(self.path),
                hint="check that the folder is writable (rlctl writes a lock file there)",
            ) from err
        except BaseException:
            self._close_dir()
            raise
        self._close_dir()
        raise DatasetLocked(
            "the dataset's lock file keeps changing under rlctl (other writers starting and "
            "stopping)",
            where=str(self.path),
            hint="try again when no other rlctl writes this dataset",
        )

    def _clean_up(self, previous: LockHolder | None) -> None:
        """Remove what stopped writers left: only a writer holding this lock could use it."""
        from rlctl.adapters.storage.lerobot_v3.leftovers import remove_leftovers

        try:
            self.removed = tuple(remove_leftovers(self.root))
        except OSError as err:
            log.warning("could not look for leftovers", root=str(self.root), error=str(err))
        if previous is not None:
            log.warning(
                "took over the lock left by a writer that was stopped (killed or crashed); "
                "removed what it left behind. Rows of an episode it had not finished are no part "
                "of the dataset (`rlctl record --resume` drops them)",
                root=str(self.root),
                previous=previous.describe(),
                removed=list(self.removed),
            )
        elif self.removed:
            log.warning(
                "removed what an interrupted writer left behind",
                root=str(self.root),
                removed=list(self.removed),
            )

    def _try_once(self) -> tuple[int, LockHolder | None] | None:
        """A descriptor holding the flock on the file now at `path` and the holder its file
        named before (a writer that was stopped), or None to try again."""
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(LOCK_NAME, flags, 0o644, dir_fd=self._dir)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                holder = LockHolder.parse(os.pread(fd, _MAX_BODY, 0))
                if holder is not None and holder.is_gone() and self._same_file(fd):
                    # The writer is dead, yet its flock lives on in an inherited descriptor.
                    log.warning(
                        "taking over the lock of a writer that is gone",
                        root=str(self.root),
                        holder=holder.describe(),
                    )
                    self._unlink()
                    os.close(fd)
                    return None
                raise self._locked(holder) from None
            if not self._same_file(fd):
                os.close(fd)  # released and unlinked between our open and our flock
                return None
            previous = LockHolder.parse(os.pread(fd, _MAX_BODY, 0))
            os.ftruncate(fd, 0)
            os.pwrite(fd, LockHolder.me(self._command).body(), 0)
            return fd, previous
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise

    def _same_file(self, fd: int) -> bool:
        try:
            now = os.stat(LOCK_NAME, dir_fd=self._dir, follow_symlinks=False)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)

    def _unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(LOCK_NAME, dir_fd=self._dir)

    def _close_dir(self) -> None:
        folder, self._dir = self._dir, None
        if folder is not None:
            os.close(folder)

    def _locked(self, holder: LockHolder | None) -> DatasetLocked:
        who = holder.describe() if holder is not None else "a process that left no name"
        return DatasetLocked(
            f"another writer is using this dataset: {who}",
            where=str(self.root),
            hint="wait for it to finish or stop it; readers may still read the dataset. A lock "
            "left by a killed process is taken over by the next writer",
        )

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self._same_file(fd):
                self._unlink()  # while the flock is held: see the docstring
        except OSError as err:
            log.warning("could not remove the lock file", path=str(self.path), error=str(err))
        finally:
            os.close(fd)
            self._close_dir()

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def read_holder(root: str | Path) -> LockHolder | None:
    """Who the lock file of `root` names, if there is one (held or stale)."""
    try:
        with (Path(root) / LOCK_NAME).open("rb") as file:
            return LockHolder.parse(file.read(_MAX_BODY))
    except OSError:
        return None


@contextlib.contextmanager
def writing(root: str | Path, command: str | None = None) -> Iterator[DatasetLock]:
    """Hold the write lock of `root` (created if absent) for the block."""
    path = Path(root).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DatasetError(
            f"the dataset folder cannot be created: {err.strerror or err}", where=str(path)
        ) from err
    with DatasetLock(path, command) as lock:
        yield lock
