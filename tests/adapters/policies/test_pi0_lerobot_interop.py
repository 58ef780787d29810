"""π0 and π0.5 checkpoints both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names a
Python with lerobot[pi]==0.6.1): a checkpoint LeRobot makes predicts in rlctl the chunk LeRobot
predicts for the same raw inputs, task text and initial noise, and a checkpoint rlctl saves
predicts in LeRobot what it predicts in rlctl. LeRobot builds at tiny sizes through the harness's
patches (lerobot_pi0.py); both read one tiny local tokenizer under PaliGemma's Hub name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="π0 needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.pi0 import PI0Config
from rlctl.domain.policies.pi05 import PI05Config

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_pi0.py"
TOLERANCE = 1e-4
VLM = (
    "custom:width=32,depth=2,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)
EXPERT = "custom:width=16,depth=2,mlp_dim=32,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320"
SIZES = {"paligemma_variant": VLM, "action_expert_variant": EXPERT, "image_resolution": [28, 28]}

SPECS: dict[str, dict[str, Any]] = {
    "pi0, one camera": {
        "type": "pi0",
        "cameras": {"observation.images.top": [3, 40, 56]},
        "state_dim": 5,
        "action_dim": 3,
        "tasks": ["close the drawer", "push the t to the target"],
        "config": {"chunk_size": 4, "n_action_steps": 4, "num_inference_steps": 3,
                   "max_state_dim": 8, "max_action_dim": 8, "tokenizer_max_length": 12},
    },
    "pi0, two cameras and an empty one, short steps": {
        "type": "pi0",
        "cameras": {"observation.images.top": [3, 28, 28], "observation.images.wrist": [3, 30, 20]},
        "state_dim": 14,
        "action_dim": 7,
        "tasks": ["put the bowl on the plate", ""],
        "config": {"chunk_size": 6, "n_action_steps": 2, "num_inference_steps": 2,
                   "max_state_dim": 16, "max_action_dim": 16, "tokenizer_max_length": 8,
                   "empty_cameras": 1},
    },
    "pi05, one camera": {
        "type": "pi05",
        "cameras": {"observation.images.top": [3, 40, 56]},
        "state_dim": 5,
        "action_dim": 3,
        "tasks": ["close the drawer", "pick_up the cube\n"],
        "config": {"chunk_size": 4, "n_action_steps": 4, "num_inference_steps": 3,
                   "max_state_dim": 8, "max_action_dim": 8, "tokenizer_max_length": 48},
    },
    "pi05, two cameras, mean-std state": {
        "type": "pi05",
        "cameras": {"observation.images.top": [3, 28, 28], "observation.images.wrist": [3, 56, 40]},
        "state_dim": 3,
        "action_dim": 6,
        "tasks": ["open the drawer", "push the t to the target"],
        "config": {"chunk_size": 5, "n_action_steps": 3, "num_inference_steps": 4,
                   "max_state_dim": 8, "max_action_dim": 8, "tokenizer_max_length": 40,
                   "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "MEAN_STD",
                                             "ACTION": "MEAN_STD"}},
    },
}  # fmt: skip


def write_inputs(path: Path, spec: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    config = spec["config"]
    inputs: dict[str, Any] = {
        "observation.state": rng.normal(size=(2, spec["state_dim"])).astype(np.float32),
        "noise": rng.normal(size=(2, config["chunk_size"], config["max_action_dim"])).astype(
            np.float32
        ),
        "task": np.array(spec["tasks"]),
    }
    for key, shape in spec["cameras"].items():
        inputs[key] = rng.uniform(size=(2, *shape)).astype(np.float32)
    np.savez(path, **inputs)
    return inputs


def rlctl_chunk(policy, inputs: dict[str, Any]) -> np.ndarray:
    observation = {k: v for k, v in inputs.items() if k not in ("task", "noise")}
    observation["task"] = [str(t) for t in inputs["task"]]
    return policy.predict_chunk(observation, noise=inputs["noise"]).actions.numpy()


def random_stats(spec: dict[str, Any], seed: int) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    stats = {}
    for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"])):
        low = rng.normal(size=dim) - 2
        stats[key] = {
            "mean": rng.normal(size=dim),
            "std": rng.uniform(0.5, 2, size=dim),
            "q01": low,
            "q99": low + rng.uniform(1, 4, size=dim),
        }
    return stats


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_predict_the_same_chunks_in_both_tools(
    name: str, lerobot, tiny_paligemma_tokenizer: Path, tmp_path: Path
) -> None:
    spec = {**SPECS[name], "seed": 7}
    spec["config"] = {**SIZES, **spec["config"]}
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec, seed=3)
    tokenizer = tiny_paligemma_tokenizer

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(LEROBOT_SCRIPT, "make", theirs, tokenizer, json.dumps(spec), inputs_path)
    loaded = load_policy_folder(theirs)
    ours = rlctl_chunk(loaded, inputs)
    expected = np.array(made["chunk"])
    assert ours.shape == expected.shape == (2, spec["config"]["chunk_size"], spec["action_dim"])
    diff = float(np.abs(ours - expected).max())
    print(f"{name}: LeRobot checkpoint in rlctl, max abs diff {diff:.3g}")
    assert diff <= TOLERANCE
    # Without its speed paths, rlctl runs LeRobot's arithmetic step for step.
    loaded.model.model.speed_paths = False
    diff = float(np.abs(rlctl_chunk(loaded, inputs) - expected).max())
    print(f"{name}: the same without speed paths, max abs diff {diff:.3g}")
    assert diff <= TOLERANCE

    # rlctl's checkpoint (its own random weights and statistics), in LeRobot.
    torch.manual_seed(11)
    config_class = PI0Config if spec["type"] == "pi0" else PI05Config
    config = config_class(
        input_features={
            "observation.state": typed_feature("STATE", (spec["state_dim"],)),
            **{k: typed_feature("VISUAL", tuple(s)) for k, s in spec["cameras"].items()},
        },
        output_features={"action": typed_feature("ACTION", (spec["action_dim"],))},
        device="cpu",
        **spec["config"],
    )
    policy = create_policy(config, random_stats(spec, seed=5))
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    folder = policy.save(tmp_path / "rlctl_model")
    ours = rlctl_chunk(policy, inputs)
    predicted = np.array(
        lerobot(LEROBOT_SCRIPT, "predict", folder, tokenizer, inputs_path)["chunk"]
    )
    diff = float(np.abs(ours - predicted).max())
    print(f"{name}: rlctl checkpoint in LeRobot, max abs diff {diff:.3g}")
    assert diff <= TOLERANCE
