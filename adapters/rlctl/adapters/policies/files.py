"""Reading a checkpoint's JSON and safetensors files, with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file

from rlctl.adapters.policies.errors import CheckpointError, CheckpointNotFound


def read_checkpoint_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
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
