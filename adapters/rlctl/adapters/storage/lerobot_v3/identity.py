"""Noticing that a dataset was replaced while it was open.

An edit in place swaps a new folder in at the dataset's path. A reader opened before keeps the
old metadata (episode spans, file numbers), but files it opens afterwards by path are the new
dataset's: it would return frames of other episodes without a word. The folder itself tells:
the swap puts another directory (another inode) at the path. A reader records the root's
identity when it opens the dataset and compares it after opening files; one `stat` per batch.
Appending (a recording) keeps the folder, and the frames already written never move.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from rlctl.domain.errors import DatasetError


class DatasetChanged(DatasetError):
    """The dataset folder was replaced (edited in place) while a reader had it open."""


@attrs.frozen
class FolderIdentity:
    root: Path
    device: int
    inode: int

    @classmethod
    def of(cls, root: Path) -> FolderIdentity:
        root = Path(root).absolute()
        info = root.stat()
        return cls(root, info.st_dev, info.st_ino)

    def unchanged(self) -> bool:
        try:
            info = self.root.stat()
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == (self.device, self.inode)

    def check(self) -> None:
        """Raise `DatasetChanged` when another folder is at the root now (or none)."""
        if not self.unchanged():
            raise changed_error(self.root)


def changed_error(root: Path) -> DatasetChanged:
    """The error for a dataset replaced under a reader, naming the edit when its journal can."""
    from rlctl.adapters.storage.lerobot_v3.tools.edit_journal import last_edit

    last = last_edit(root)
    if last is not None:
        by = f"edited by `{last.command}`" + (f" at {last.at}" if last.at else "")
    else:
        by = "another folder was put in its place"
    return DatasetChanged(
        f"the dataset at {root} changed while it was open ({by}); open it again",
        where=str(root),
        hint="its episodes and files are not the ones this reader knows: open the dataset "
        "again (a new reader, DataLoader or viewer) to read it as it is now",
    )
