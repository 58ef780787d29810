"""Reading a checkpoint's JSON and safetensors files, with errors that name the file.

A checkpoint reads nothing outside its own folder: a file name found in its JSON (a processor's
`state_file`) must be relative, without `..`, and — links followed — land inside the folder, and
so must the fixed files themselves. The one outside place allowed is the Hub cache's `blobs/`
folder beside a `snapshots/<commit>/` checkpoint, which is where its files' links point.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file

from rlctl.adapters.policies.errors import CheckpointError, CheckpointNotFound


def read_checkpoint_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise CheckpointError(
            f"the file is not UTF-8 text (byte {err.start}): not a JSON file",
            where=str(path),
            hint="the file is damaged: save or download the checkpoint again",
        ) from err
    except FileNotFoundError:
        raise CheckpointNotFound(
            "the file is missing from the checkpoint",
            where=str(path),
            hint="a policy folder holds config.json, model.safetensors and the "
            "policy_preprocessor.json / policy_postprocessor.json LeRobot or rlctl saved with it",
        ) from None
    except OSError as err:
        raise CheckpointError(f"cannot read the file ({err.strerror})", where=str(path)) from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise CheckpointError(
            f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}",
            where=str(path),
            hint="the file is damaged: save or download the checkpoint again",
        ) from err
    except RecursionError:
        raise CheckpointError(
            "invalid JSON: nested too deeply to read",
            where=str(path),
            hint="the file is damaged: save or download the checkpoint again",
        ) from None


def read_arrays(path: Path, *, referenced_by: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise CheckpointNotFound(
            f"the state file {path.name} named in {referenced_by.name} is missing",
            where=str(path),
            hint="copy the whole checkpoint folder, state files included",
        )
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f"cannot read the safetensors file: {err}",
            where=str(path),
            hint="the file is damaged: save or download the checkpoint again",
        ) from err


CONFINED_HINT = (
    "a checkpoint names its files relative to its own folder, without '..' or links out of it "
    "(as LeRobot and rlctl write them): the file was edited or the folder is not a genuine "
    "checkpoint; save or download it again"
)


def _roots(folder: Path) -> list[Path]:
    """Where a checkpoint's files may be: its folder, and a Hub cache snapshot's blobs."""
    folder = folder.absolute()
    roots = [folder.resolve()]
    for ancestor in (folder, *folder.parents):
        if ancestor.name == "snapshots" and (ancestor.parent / "blobs").is_dir():
            roots.append((ancestor.parent / "blobs").resolve())
            break
    return roots


def inside_checkpoint(folder: Path, path: Path, *, where: str) -> Path:
    """`path` (below `folder`), refused when a link takes it out of the checkpoint."""
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root) for root in _roots(folder)):
        raise CheckpointError(
            f"{path.name} is a link to {resolved}, outside the checkpoint folder",
            where=where,
            hint=CONFINED_HINT,
        )
    return path


def named_file(folder: Path, name: Any, *, referenced_by: Path, key: str) -> Path:
    """The file `name`, read at `key` of `referenced_by`, as a path inside `folder`."""
    where = f"{referenced_by}: {key}"
    if not isinstance(name, str) or not name.strip():
        raise CheckpointError(
            f"{key} must be a file name, found {json.dumps(name)[:80]}", where=where,
            hint=CONFINED_HINT,
        )  # fmt: skip
    pure = PurePosixPath(name.replace("\\", "/"))
    if (
        pure.is_absolute()
        or ".." in pure.parts
        or name.startswith("~")
        or re.match(r"^[A-Za-z]:", name)
        or "\x00" in name
    ):
        raise CheckpointError(
            f"{key} {name[:120]!r} points outside the checkpoint folder",
            where=where,
            hint=CONFINED_HINT,
        )
    return inside_checkpoint(folder, folder / pure, where=where)
