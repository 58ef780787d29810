"""`DatasetFolders` on the local disk: swapping a rebuilt dataset in for the original.

On Linux the two folders are exchanged in one `renameat2(RENAME_EXCHANGE)` call: at every
instant the path holds a whole dataset, the old one or the new one. Elsewhere (or on filesystems
without it) two renames are used, and a crash between them leaves the original under a hidden
name beside the path, which the error message names.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import shutil
from pathlib import Path

import structlog

from rlctl.adapters.storage.dataset_lock import DatasetLock
from rlctl.adapters.storage.episode_source import dataset_root
from rlctl.domain.errors import DatasetError

log = structlog.get_logger(__name__)

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _renameat2() -> object | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically; False when the system cannot (the caller falls back)."""
    if _RENAMEAT2 is None:
        return False
    result = _RENAMEAT2(  # type: ignore[operator]
        _AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), str(a))


class LocalDatasetFolders:
    def exists(self, location: str) -> bool:
        return Path(location).expanduser().exists()

    def is_empty(self, location: str) -> bool:
        path = Path(location).expanduser()
        return not path.exists() or (path.is_dir() and not any(path.iterdir()))

    def staging_for(self, location: str) -> str:
        path = Path(location).expanduser().resolve()
        for number in itertools.count():
            staged = path.with_name(f".{path.name}.rlctl-edit-{os.getpid()}-{number}")
            if not staged.exists():
                return str(staged)
        raise AssertionError("unreachable")

    def replace(self, staged: str, location: str, keep_old_at: str | None = None) -> None:
        new, path = Path(staged), Path(location).expanduser().resolve()
        if exchange(new, path):
            old = new  # the exchange left the original where the new dataset was
        else:
            old = path.with_name(f".{path.name}.rlctl-old-{os.getpid()}")
            path.rename(old)
            try:
                new.rename(path)
            except OSError as err:
                old.rename(path)
                raise DatasetError(
                    f"the rebuilt dataset could not be moved into place: {err.strerror}",
                    where=str(path),
                    hint="the original is unchanged; check the folder's permissions",
                ) from err
        if keep_old_at is not None:
            old.rename(Path(keep_old_at).expanduser())
        else:
            shutil.rmtree(old, ignore_errors=True)
        log.info("dataset replaced", root=str(path), original=keep_old_at)

    def remove(self, location: str) -> None:
        shutil.rmtree(Path(location).expanduser(), ignore_errors=True)

    def lock(self, location: str) -> DatasetLock:
        return DatasetLock(dataset_root(location))
