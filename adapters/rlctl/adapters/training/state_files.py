"""`training_state/`: what resuming needs beyond the model, in LeRobot's files.

    optimizer_state.safetensors     optimiser tensors, flat keys `state/<param>/<name>`
    optimizer_param_groups.json     its parameter groups (lr, betas, …)
    scheduler_state.json            the LR scheduler's state dict
    rng_state.safetensors           python, numpy and torch (CPU, CUDA) generator states
    training_step.json              {"step", "num_processes", "batch_size", "data_seed"}

Only tensors and JSON: nothing is unpickled when a checkpoint is read.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch.optim import Optimizer

from rlctl.adapters.policies.errors import CheckpointError, CheckpointNotFound

OPTIMIZER_STATE = "optimizer_state.safetensors"
OPTIMIZER_PARAM_GROUPS = "optimizer_param_groups.json"
SCHEDULER_STATE = "scheduler_state.json"
RNG_STATE = "rng_state.safetensors"
TRAINING_STEP = "training_step.json"
GRAD_SCALER_STATE = "grad_scaler_state.json"
LIVE_MODEL = "model.safetensors"


def write_json(data: Any, path: Path) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def read_state_json(path: Path) -> Any:
    if not path.is_file():
        raise CheckpointNotFound(
            "the file is missing from the training state",
            where=str(path),
            hint="the checkpoint is incomplete: resume from another checkpoints/<step> folder",
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise CheckpointError(f"cannot read the file: {err}", where=str(path)) from err


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise CheckpointNotFound(
            "the file is missing from the training state",
            where=str(path),
            hint="the checkpoint is incomplete: resume from another checkpoints/<step> folder",
        )
    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises several kinds for a damaged file
        raise CheckpointError(f"cannot read the safetensors file: {err}", where=str(path)) from err


def save_tensors(tensors: Mapping[str, torch.Tensor], path: Path) -> None:
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path))


# --- optimiser and scheduler --------------------------------------------------------------


# How the update is computed, not what it computes: the files keep torch's defaults (so the
# state reads back into LeRobot's optimiser), and a restored optimiser keeps its own choice.
IMPLEMENTATION_FLAGS = {"foreach": None, "fused": None}


def save_optimizer(optimizer: Optimizer, folder: Path) -> None:
    state = optimizer.state_dict()
    flat = {
        f"state/{param}/{name}": value
        for param, per in state["state"].items()
        for name, value in per.items()
        if isinstance(value, torch.Tensor)
    }
    save_tensors(flat, folder / OPTIMIZER_STATE)
    groups = [
        {**g, **{k: v for k, v in IMPLEMENTATION_FLAGS.items() if k in g}}
        for g in state["param_groups"]
    ]
    write_json(groups, folder / OPTIMIZER_PARAM_GROUPS)


def load_optimizer(optimizer: Optimizer, folder: Path) -> None:
    current = optimizer.state_dict()
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in read_tensors(folder / OPTIMIZER_STATE).items():
        _, param, name = key.split("/", 2)
        state.setdefault(int(param), {})[name] = value
    groups = read_state_json(folder / OPTIMIZER_PARAM_GROUPS)
    if len(groups) != len(current["param_groups"]):
        raise CheckpointError(
            f"the optimiser has {len(current['param_groups'])} parameter groups, the checkpoint "
            f"{len(groups)}",
            where=str(folder / OPTIMIZER_PARAM_GROUPS),
            hint="resume with the same policy type and optimiser as the run that saved it",
        )
    for saved, live in zip(groups, current["param_groups"]):
        for key, value in live.items():
            # JSON has no tuples; give back the types the optimiser uses (betas is a tuple).
            if isinstance(value, tuple) and isinstance(saved.get(key), list):
                saved[key] = tuple(saved[key])
            if key in IMPLEMENTATION_FLAGS:
                saved[key] = value
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def save_scheduler(scheduler: Any, folder: Path) -> None:
    # A LambdaLR's functions appear as None: only its counters and rates are state.
    write_json(scheduler.state_dict(), folder / SCHEDULER_STATE)


def load_scheduler(scheduler: Any, folder: Path) -> None:
    scheduler.load_state_dict(read_state_json(folder / SCHEDULER_STATE))


# --- random generators --------------------------------------------------------------------


def rng_tensors(rank_suffix: str = "") -> dict[str, torch.Tensor]:
    """This process's generator states, under LeRobot's key names (plus `rank_suffix`)."""
    version, values, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)  # type: ignore[misc]
    out = {
        "py_rng_version": torch.tensor([version], dtype=torch.int64),
        "py_rng_state": torch.tensor(values, dtype=torch.int64),
        "np_rng_state_values": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
        "np_rng_state_index": torch.tensor([pos], dtype=torch.int64),
        "np_rng_has_gauss": torch.tensor([has_gauss], dtype=torch.int64),
        "np_rng_cached_gaussian": torch.tensor([cached], dtype=torch.float64),
        "torch_rng_state": torch.get_rng_state(),
    }
    if gauss is not None:
        out["py_rng_gauss"] = torch.tensor([gauss], dtype=torch.float64)
    if torch.cuda.is_available():
        out["torch_cuda_rng_state"] = torch.cuda.get_rng_state()
    return {k + rank_suffix: v for k, v in out.items()}


def restore_rng(tensors: Mapping[str, torch.Tensor], rank: int = 0) -> None:
    def get(key: str) -> torch.Tensor | None:
        # A rank's own torch state when it was saved, else rank 0's.
        return tensors.get(f"{key}.rank{rank}", tensors.get(key))

    gauss = get("py_rng_gauss")
    random.setstate(
        (
            int(tensors["py_rng_version"].item()),
            tuple(int(v) for v in tensors["py_rng_state"].tolist()),
            None if gauss is None else float(gauss.item()),
        )
    )
    np.random.set_state(
        (
            "MT19937",
            tensors["np_rng_state_values"].numpy().astype(np.uint32),
            int(tensors["np_rng_state_index"].item()),
            int(tensors["np_rng_has_gauss"].item()),
            float(tensors["np_rng_cached_gaussian"].item()),
        )
    )
    state = get("torch_rng_state")
    assert state is not None
    torch.set_rng_state(state)
    cuda = get("torch_cuda_rng_state")
    if cuda is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(cuda)
