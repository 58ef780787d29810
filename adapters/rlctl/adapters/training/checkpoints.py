"""The run folder on disk, as `lerobot-train` lays it out (`rlctl.domain.run_layout`), and
finding what to resume.

A checkpoint is written under a hidden staging name and renamed into place, then `last` is
re-pointed with an atomic replace: a run killed while saving leaves the previous checkpoint and
`last` intact, and the half-written folder is ignored (and removed by the next save).

A resumed checkpoint reads nothing outside itself: `last` must point at a folder beside it, and
no file of the checkpoint may be a link out of it (`confined`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from rlctl.adapters.policies.errors import CheckpointError
from rlctl.adapters.policies.files import inside_checkpoint
from rlctl.adapters.training.state_files import TRAINING_STEP, read_state_json
from rlctl.application.ports.training import CheckpointRef
from rlctl.domain.run_layout import (
    CHECKPOINTS_DIR,
    LAST_CHECKPOINT,
    PRETRAINED_DIR,
    TRAINING_STATE_DIR,
)

LAST = LAST_CHECKPOINT
_STAGING = ".partial-"


def _is_checkpoint(folder: Path) -> bool:
    return (folder / TRAINING_STATE_DIR / TRAINING_STEP).is_file() and (
        folder / PRETRAINED_DIR
    ).is_dir()


def _ref(folder: Path) -> CheckpointRef:
    step = int(read_state_json(folder / TRAINING_STATE_DIR / TRAINING_STEP)["step"])
    return CheckpointRef(str(folder), step)


def find_checkpoint(location: str | os.PathLike[str]) -> CheckpointRef | None:
    """`location` as a checkpoint (or its pretrained_model), or a run folder's `last` one —
    or, should `last` be missing or broken, its highest complete one."""
    path = Path(location).expanduser()
    if path.name == PRETRAINED_DIR:
        path = path.parent
    if _is_checkpoint(path):
        return _ref(path)
    folder = path / CHECKPOINTS_DIR
    if not folder.is_dir():
        return None
    last = folder / LAST
    if last.is_symlink() and not last.resolve().parent == folder.resolve():
        raise CheckpointError(
            f"{LAST} points at {last.resolve()}, not at a checkpoint of this run",
            where=str(last),
            hint=f"{LAST} must link to a checkpoints/<step> folder beside it: re-point it "
            f"(ln -sfn <step> {last}) or resume from a checkpoints/<step> folder",
        )
    if _is_checkpoint(last):
        return _ref(last.resolve())
    complete = [p for p in folder.iterdir() if p.name.isdigit() and _is_checkpoint(p)]
    return max((_ref(p) for p in complete), key=lambda ref: ref.step, default=None)


def confined(checkpoint: Path) -> None:
    """Refuse a checkpoint holding a link to outside itself (the files resuming reads)."""
    for path in sorted(checkpoint.rglob("*")):
        inside_checkpoint(checkpoint, path, where=str(path))


def write_checkpoint(output_dir: Path, name: str, fill: Callable[[Path], None]) -> Path:
    """`fill(staging)` writes the checkpoint's content; it then appears as
    `checkpoints/<name>` and `last` points at it."""
    staging = begin_checkpoint(output_dir, name)
    try:
        fill(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return commit_checkpoint(staging, name)


def begin_checkpoint(output_dir: Path, name: str) -> Path:
    """An empty staging folder for checkpoint `name` (leftovers of killed saves removed)."""
    folder = output_dir / CHECKPOINTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for leftover in folder.glob(f".*{_STAGING}*"):
        shutil.rmtree(leftover, ignore_errors=True)
    staging = folder / f".{name}{_STAGING}{os.getpid()}"
    staging.mkdir()
    return staging


def commit_checkpoint(staging: Path, name: str) -> Path:
    """The filled `staging` folder becomes `checkpoints/<name>`, and `last` points at it."""
    folder = staging.parent
    try:
        target = folder / name
        if target.exists():
            old = folder / f".{name}{_STAGING}old"
            target.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    point_last(folder, name)
    return target


def point_last(folder: Path, name: str) -> None:
    link = folder / LAST
    temporary = folder / f".{LAST}{_STAGING}{os.getpid()}"
    if temporary.is_symlink() or temporary.exists():
        temporary.unlink()
    temporary.symlink_to(name)
    temporary.replace(link)
