"""What the rlctl side of the LeRobot interop tests (test_*_lerobot_interop.py) shares: features
and statistics made the way the lerobot_*.py scripts make theirs, randomised weights, and the
comparisons (predictions, losses, saved layout) with what LeRobot printed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.domain.features import typed_feature

KINDS = {"observation.state": "STATE", "observation.environment_state": "ENV"}
PIPELINES = ("policy_preprocessor", "policy_postprocessor")


def input_features(shapes: dict[str, Any]) -> dict:
    """{key: shape} -> rlctl's features, in order: the state and environment state by their
    keys, anything else a camera (as lerobot_common.input_features)."""
    return {k: typed_feature(KINDS.get(k, "VISUAL"), tuple(s)) for k, s in shapes.items()}


def action_features(dim: int) -> dict:
    return {"action": typed_feature("ACTION", (dim,))}


def min_max_stats(
    rng: np.random.Generator, dims: Iterable[tuple[str, int]]
) -> dict[str, dict[str, np.ndarray]]:
    """Min-max statistics drawn from `rng` for each (key, dim), in order."""
    stats = {}
    for key, dim in dims:
        low = rng.uniform(-2, 0, size=dim)
        stats[key] = {"min": low, "max": low + rng.uniform(0.5, 3, size=dim)}
    return stats


def mean_std_stats(rng: np.random.Generator, cameras: Iterable[str]) -> dict[str, dict]:
    """Per-channel mean-std statistics drawn from `rng` for each camera key, in order."""
    return {
        key: {
            "mean": rng.uniform(0.3, 0.6, size=(3, 1, 1)),
            "std": rng.uniform(0.1, 0.3, size=(3, 1, 1)),
        }
        for key in cameras
    }


def randomise(model: torch.nn.Module, scale: float, skip: tuple[str, ...] = ()) -> None:
    """Every weight (but those whose name starts with one of `skip`) drawn from torch's
    generator times `scale`."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not name.startswith(skip):
                param.copy_(torch.randn_like(param) * scale)


def random_policy(
    config: Any, stats: Any, scale: float, skip: tuple[str, ...] = (), seed: int = 11
) -> Any:
    """rlctl's policy for `config` and `stats`, built after torch.manual_seed(seed), every
    weight then randomised (see `randomise`)."""
    torch.manual_seed(seed)
    policy = create_policy(config, stats)
    randomise(policy.model, scale, skip)
    return policy


def step_names(folder: Path, name: str) -> list[str]:
    data = json.loads((folder / f"{name}.json").read_text())
    return [step["registry_name"] for step in data["steps"]]


def assert_same_layout(ours: Path, theirs: Path, pipelines: Iterable[str] = PIPELINES) -> None:
    """rlctl's checkpoint folder has LeRobot's processor steps and config keys."""
    for pipeline in pipelines:
        assert step_names(ours, pipeline) == step_names(theirs, pipeline)
    written = json.loads((ours / "config.json").read_text())
    assert set(written) == set(json.loads((theirs / "config.json").read_text()))


def assert_close(label: str, ours: np.ndarray, expected: Any, tolerance: float) -> None:
    """rlctl's values within `tolerance` of LeRobot's (printed with `label`)."""
    diff = float(np.abs(ours - np.asarray(expected)).max())
    print(f"{label}, max abs diff {diff:.3g}")
    assert diff <= tolerance


def assert_same_loss(label: str, loss: float, parts: dict, theirs: dict[str, Any]) -> None:
    """rlctl's loss and its parts are LeRobot's (`theirs`: {"loss", "parts"})."""
    print(f"{label} loss {loss:.6g}, LeRobot's {theirs['loss']:.6g}")
    assert loss == pytest.approx(theirs["loss"], rel=1e-4, abs=1e-5)
    assert set(parts) == set(theirs["parts"])
    for key, value in theirs["parts"].items():
        assert parts[key] == pytest.approx(value, rel=1e-3, abs=1e-4), key
