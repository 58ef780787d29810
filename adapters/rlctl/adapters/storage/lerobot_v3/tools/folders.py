"""`DatasetFolders` on the local disk: swapping a rebuilt dataset in for the original.

On Linux the two folders are exchanged in one `renameat2(RENAME_EXCHANGE)` call: at every
instant the path holds a whole dataset, the old one or the new one. Elsewhere (or on filesystems
without it) two renames are used; a crash between them leaves the original under a hidden name
beside the path, and the next writer (or `dataset check --fix`) puts it back.

What the folder holds besides the dataset is carried into the new one (`foreign_files`), and
the edit's journal entry is written into the new folder before the swap (`edit_journal`).
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
from rlctl.adapters.storage.lerobot_v3.leftovers import (
    edit_folder,
    old_folder,
    restore_interrupted_swap,
)
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools.edit_journal import last_edit, write_journal
from rlctl.adapters.storage.lerobot_v3.tools.foreign_files import (
    CARD_NAME,
    carry_foreign,
    settle_after_swap,
)
from rlctl.application.hub_cards import update_card_counts
from rlctl.application.ports.dataset_tools import EditRecord
from rlctl.domain.errors import DatasetError, RlctlError

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
            staged = edit_folder(path, os.getpid(), number)
            if not staged.exists():
                return str(staged)
        raise AssertionError("unreachable")

    def replace(
        self, staged: str, location: str, keep_old_at: str | None = None
    ) -> tuple[str, ...]:
        new, path = Path(staged), Path(location).expanduser().resolve()
        try:
            try:
                carried = carry_foreign(path, new, card=_updated_card(path, new))
            except OSError as err:
                raise DatasetError(
                    f"the files kept beside the dataset cannot be carried into the new folder: "
                    f"{err.strerror or err} ({err.filename})",
                    where=str(path),
                    hint="the dataset is unchanged; make the file readable (or move it out of "
                    "the dataset's folder) and run the edit again",
                ) from err
            old = self._swap(new, path)
        except BaseException:
            shutil.rmtree(new, ignore_errors=True)
            raise
        # From here the new dataset is in place: nothing may remove `new`'s path blindly.
        try:
            settle_after_swap(old, path, carried)
        except OSError as err:
            log.warning("could not compare the folders after the swap", error=str(err))
        if keep_old_at is not None:
            try:
                old.rename(Path(keep_old_at).expanduser())
            except OSError as err:
                raise DatasetError(
                    f"the new dataset is in place, but the original could not be moved to "
                    f"{keep_old_at}: {err.strerror}",
                    where=str(old),
                    hint=f"the original is whole at {old}; move it yourself",
                ) from err
        else:
            shutil.rmtree(old, ignore_errors=True)
        kept = carried.shown()
        log.info("dataset replaced", root=str(path), original=keep_old_at, kept=list(kept))
        return kept

    def _swap(self, new: Path, path: Path) -> Path:
        """Put `new` at `path`; where the original went."""
        if exchange(new, path):
            return new  # the exchange left the original where the new dataset was
        old = old_folder(path, os.getpid())
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
        return old

    def remove(self, location: str) -> None:
        shutil.rmtree(Path(location).expanduser(), ignore_errors=True)

    def lock(self, location: str) -> DatasetLock:
        restore_interrupted_swap(Path(location).expanduser().absolute())
        return DatasetLock(dataset_root(location))

    def last_edit(self, location: str) -> EditRecord | None:
        return last_edit(Path(location).expanduser())

    def record_edit(self, staged: str, location: str, record: EditRecord) -> None:
        write_journal(Path(staged), Path(location).expanduser(), record)

    def clean_leftovers(self, location: str) -> tuple[str, ...]:
        restored = restore_interrupted_swap(Path(location).expanduser().absolute())
        with self.lock(location) as lock:
            removed = lock.removed
        return (*([f"{restored} (put back in place)"] if restored else []), *removed)


def _updated_card(old: Path, new: Path) -> str | None:
    """The old folder's README.md with the new dataset's counts; None when it has none (or no
    card is there)."""
    card = old / CARD_NAME
    if not card.is_file() or card.is_symlink():
        return None
    try:
        text = card.read_text(encoding="utf-8")
        meta = LeRobotMetaReader().read_meta(new)
    except (OSError, UnicodeDecodeError, RlctlError):
        return None
    updated = update_card_counts(text, meta)
    return updated if updated != text else None
