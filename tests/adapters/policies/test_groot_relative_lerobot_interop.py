"""GR00T N1.7's relative actions both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names
a Python with lerobot[groot]==0.6.1): on a dataset whose episodes outlast the 40-step chunk
(relative_arm_dataset.py), rlctl's per-step relative statistics are LeRobot's; a relative
checkpoint LeRobot builds from them predicts in rlctl the chunk it predicts in LeRobot (decoded
back to absolute actions) and packs a training batch the same; and rlctl's relative checkpoint
does the same in LeRobot. Tiny base model: tiny_groot.py, with LeRobot's random weights
(lerobot_groot.py)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy, load_policy_folder
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools.stats_access import LeRobotStatsAccess
from rlctl.application.relative_actions import (
    relative_action_statistics,
    with_relative_action_names,
)
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.groot import GrootConfig

HERE = Path(__file__).parent
SCRIPT = HERE / "lerobot_groot_relative.py"
TINY_SCRIPT = HERE / "tiny_groot.py"
DATASET_SCRIPT = HERE / "relative_arm_dataset.py"
TOLERANCE = 1e-4
EXCLUDE = ["gripper"]
CAMERAS = {"observation.images.wrist": [3, 32, 32], "observation.images.top": [3, 32, 32]}
CONFIG = {
    "chunk_size": 8,
    "n_action_steps": 8,
    "max_state_dim": 16,
    "max_action_dim": 16,
    "use_bf16": False,
}


def our_statistics(root: Path) -> tuple[GrootConfig, dict[str, Any]]:
    """What `rlctl train` computes before a relative GR00T run (the training plan's path)."""
    access = LeRobotStatsAccess()
    meta = LeRobotMetaReader().read_meta(str(root))
    config = with_relative_action_names(
        GrootConfig(use_relative_actions=True, relative_exclude_joints=EXCLUDE), meta.features
    )
    actions, states, episodes = [], [], []
    for episode, columns in access.numeric_columns(str(root), ["action", "observation.state"]):
        actions.append(columns["action"])
        states.append(columns["observation.state"])
        episodes.append(np.full(len(columns["action"]), episode))
    stats = relative_action_statistics(
        config, np.concatenate(actions), np.concatenate(states), np.concatenate(episodes)
    )
    return config, stats


def write_inputs(folder: Path, root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """An observation (states from the dataset) with noise, and a training batch (a chunk of
    the dataset's actions with the state it starts from)."""
    rng = np.random.default_rng(3)
    access = LeRobotStatsAccess()
    columns = dict(access.numeric_columns(str(root), ["action", "observation.state"]))
    states, actions = columns[0]["observation.state"], columns[0]["action"]
    starts = [2, 30]
    observation: dict[str, Any] = {
        "observation.state": states[starts].astype(np.float32),
        "task": np.array(["close the drawer", "Pick up the cube!"]),
    }
    for key, shape in CAMERAS.items():
        observation[key] = rng.uniform(size=(2, *shape)).astype(np.float32)
    inputs = {**observation, "noise": rng.normal(size=(2, 8, 16)).astype(np.float32)}
    batch = {
        **observation,
        "action": np.stack([actions[s : s + 8] for s in starts]).astype(np.float32),
    }
    np.savez(folder / "inputs.npz", **inputs)
    np.savez(folder / "batch.npz", **batch)
    return inputs, batch


def raw(values: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in values.items() if k not in ("task", "noise")}
    out["task"] = [str(t) for t in values["task"]]
    return out


def compare(policy: LoadedPolicy, theirs: dict[str, Any], inputs: dict, batch: dict) -> None:
    chunk = policy.predict_chunk(raw(inputs), noise=inputs["noise"]).actions.numpy()
    expected = np.array(theirs["chunk"])
    assert chunk.shape == expected.shape == (2, 8, 4)
    diff = float(np.abs(chunk - expected).max())
    print(f"chunk (absolute actions) max abs diff {diff:.3g}")
    assert diff <= TOLERANCE
    # Most of the model's normalised actions lie inside the clip: the chunks compare the models.
    assert (np.abs(np.array(theirs["raw"])) < 1).mean() > 0.5
    packed = policy.preprocessor.process_batch(raw(batch))
    np.testing.assert_allclose(packed["action"].numpy(), theirs["packed"], atol=1e-5)
    np.testing.assert_array_equal(packed["action_mask"].numpy(), theirs["mask"])


@pytest.mark.lerobot
@pytest.mark.slow
def test_relative_statistics_and_checkpoints_are_the_same_in_both_tools(
    lerobot, tiny_groot: Path, tmp_path: Path
) -> None:
    root = runpy.run_path(str(DATASET_SCRIPT))["write_arm_dataset"](tmp_path / "arm")
    tiny = runpy.run_path(str(TINY_SCRIPT))["write_tiny_groot"](tmp_path / "tiny")

    # The per-step relative statistics of the training run.
    theirs_stats = lerobot(SCRIPT, "stats", root, json.dumps(EXCLUDE))["stats"]
    named, ours_stats = our_statistics(root)
    assert set(ours_stats) == set(theirs_stats)
    assert ours_stats["count"] == theirs_stats["count"] == [14] * 40
    for name in ("min", "max", "mean", "std", "q01", "q99"):
        np.testing.assert_allclose(ours_stats[name], theirs_stats[name], rtol=1e-6, atol=1e-7)

    meta = json.loads((root / "meta" / "stats.json").read_text())
    stats = {
        "observation.state": meta["observation.state"],
        "action": meta["action"],
        "relative_action": ours_stats,
    }
    inputs, batch = write_inputs(tmp_path, root)
    spec = {
        "cameras": CAMERAS,
        "state_dim": 5,
        "action_dim": 4,
        "config": CONFIG,
        "seed": 7,
        "action_names": list(named.action_feature_names or []),
        "exclude": EXCLUDE,
        "stats": stats,
        "fps": 10,
    }

    # LeRobot's relative checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    args = (tmp_path / "inputs.npz", tmp_path / "batch.npz")
    made = lerobot(SCRIPT, "make", theirs, tiny, json.dumps(spec), *args)
    steps = json.loads((theirs / "policy_postprocessor.json").read_text())["steps"]
    assert steps[0]["registry_name"] == "groot_n1_7_action_decode_v1"
    compare(load_policy_folder(theirs, compute_dtype="keep"), made, inputs, batch)

    # rlctl's relative checkpoint, in LeRobot.
    torch.manual_seed(11)
    config = GrootConfig(
        compute_dtype="keep",  # LeRobot's bfloat16 arithmetic, whatever this CPU
        input_features={
            "observation.state": typed_feature("STATE", (5,)),
            **{k: typed_feature("VISUAL", tuple(s)) for k, s in CAMERAS.items()},
        },
        output_features={"action": typed_feature("ACTION", (4,))},
        device="cpu",
        base_model_path=str(tiny / "base"),
        use_relative_actions=True,
        relative_exclude_joints=EXCLUDE,
        action_feature_names=named.action_feature_names,
        **CONFIG,
    )
    policy = create_policy(config, stats)
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.05)
    folder = policy.save(tmp_path / "rlctl_model")
    predicted = lerobot(SCRIPT, "predict", folder, tiny, *args)
    compare(policy, predicted, inputs, batch)
