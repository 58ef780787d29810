"""SmolVLA checkpoints both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names a
Python with lerobot[smolvla]==0.6.1): a checkpoint LeRobot makes predicts in rlctl the chunk
LeRobot predicts for the same raw inputs, task text and initial noise, and a checkpoint rlctl
saves predicts in LeRobot what it predicts in rlctl. Both build on one tiny SmolVLM folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="SmolVLA needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.smolvla import SmolVLAConfig

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_smolvla.py"
TINY_SMOLVLM_SCRIPT = HERE / "tiny_smolvlm.py"
TOLERANCE = 1e-4

SPECS: dict[str, dict[str, Any]] = {
    "one camera": {
        "cameras": {"observation.images.top": [3, 48, 64]},
        "state_dim": 6,
        "action_dim": 4,
        "tasks": ["close the drawer", "push the t to the target"],
        "config": {"num_vlm_layers": 4, "chunk_size": 5, "n_action_steps": 5, "num_steps": 3},
    },
    "two cameras, short chunks": {
        "cameras": {
            "observation.images.top": [3, 64, 64],
            "observation.images.wrist": [3, 40, 56],
        },
        "state_dim": 3,
        "action_dim": 7,
        "tasks": ["put the bowl on the plate", "pick up the cube and place it in the box"],
        "config": {
            "num_vlm_layers": 4,
            "chunk_size": 8,
            "n_action_steps": 4,
            "num_steps": 5,
            "max_state_dim": 16,
            "max_action_dim": 12,
            "tokenizer_max_length": 6,
            "pad_language_to": "max_length",
        },
    },
    "fewer layers, image tokens, empty camera": {
        "cameras": {"observation.images.front": [3, 64, 48]},
        "state_dim": 14,
        "action_dim": 14,
        "tasks": ["open the drawer of the cabinet", ""],
        "config": {
            "num_vlm_layers": 2,
            "chunk_size": 3,
            "n_action_steps": 2,
            "num_steps": 2,
            "expert_width_multiplier": 0.5,
            "add_image_special_tokens": True,
            "empty_cameras": 1,
            "self_attn_every_n_layers": 3,
        },
    },
    "pretrained VLM weights (bfloat16)": {
        "cameras": {"observation.images.top": [3, 64, 64]},
        "state_dim": 4,
        "action_dim": 5,
        "tasks": ["close the drawer", "put the bowl on the plate"],
        "config": {
            "load_vlm_weights": True,
            "num_vlm_layers": 3,
            "chunk_size": 4,
            "n_action_steps": 4,
            "num_steps": 3,
        },
    },
    "half as many expert layers": {
        "cameras": {"observation.images.top": [3, 64, 64]},
        "state_dim": 2,
        "action_dim": 2,
        "tasks": ["push the t to the target", "push the t to the target"],
        "config": {
            "num_vlm_layers": 4,
            "num_expert_layers": 2,
            # LeRobot picks the expert's cross-attention layers by the expert's index and runs
            # them by the VLM's: with fewer expert layers only all-cross attention is coherent.
            "self_attn_every_n_layers": -1,
            "chunk_size": 4,
            "n_action_steps": 4,
            "num_steps": 4,
        },
    },
}


@pytest.fixture(scope="module")
def lerobot_vlm(lerobot, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny SmolVLM folder, with the processor LeRobot reads (written in LeRobot's Python,
    which has num2words)."""
    folder = tmp_path_factory.mktemp("smolvlm") / "vlm"
    lerobot(TINY_SMOLVLM_SCRIPT, folder, "--processor")
    return folder


def write_inputs(path: Path, spec: dict[str, Any], max_action_dim: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    chunk = spec["config"]["chunk_size"]
    inputs: dict[str, Any] = {
        "observation.state": rng.normal(size=(2, spec["state_dim"])).astype(np.float32),
        "noise": rng.normal(size=(2, chunk, max_action_dim)).astype(np.float32),
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


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_predict_the_same_chunks_in_both_tools(
    name: str, lerobot, lerobot_vlm: Path, tmp_path: Path
) -> None:
    spec = {**SPECS[name], "seed": 7}
    config_fields = {"resize_imgs_with_padding": [64, 64], **spec["config"]}
    spec["config"] = config_fields
    max_action_dim = config_fields.get("max_action_dim", 32)
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec, max_action_dim, seed=3)

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(
        LEROBOT_SCRIPT, "make", theirs, lerobot_vlm, json.dumps(spec), inputs_path, timeout=900
    )
    loaded = load_policy_folder(theirs, compute_dtype="keep")
    ours = rlctl_chunk(loaded, inputs)
    expected = np.array(made["chunk"])
    assert ours.shape == expected.shape == (2, config_fields["chunk_size"], spec["action_dim"])
    diff = float(np.abs(ours - expected).max())
    print(f"{name}: LeRobot checkpoint in rlctl, max abs diff {diff:.3g}")
    assert diff <= TOLERANCE
    loaded.model.model.speed_paths = False  # LeRobot's arithmetic step for step
    plain = float(np.abs(rlctl_chunk(loaded, inputs) - expected).max())
    print(f"{name}: the same without the speed paths, max abs diff {plain:.3g}")
    assert plain <= TOLERANCE

    # rlctl's checkpoint (its own random weights and statistics), in LeRobot.
    torch.manual_seed(11)
    config = SmolVLAConfig(
        compute_dtype="keep",  # LeRobot's bfloat16 arithmetic, whatever this CPU
        input_features={
            "observation.state": typed_feature("STATE", (spec["state_dim"],)),
            **{k: typed_feature("VISUAL", tuple(s)) for k, s in spec["cameras"].items()},
        },
        output_features={"action": typed_feature("ACTION", (spec["action_dim"],))},
        vlm_model_name=str(lerobot_vlm),
        device="cpu",
        **config_fields,
    )
    rng = np.random.default_rng(5)
    stats = {
        "observation.state": {
            "mean": rng.normal(size=spec["state_dim"]),
            "std": rng.uniform(0.5, 2, size=spec["state_dim"]),
        },
        "action": {
            "mean": rng.normal(size=spec["action_dim"]),
            "std": rng.uniform(0.5, 2, size=spec["action_dim"]),
        },
    }
    policy = create_policy(config, stats)
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    folder = policy.save(tmp_path / "rlctl_model")
    ours = rlctl_chunk(policy, inputs)
    predicted = np.array(lerobot(LEROBOT_SCRIPT, "predict", folder, inputs_path)["chunk"])
    diff = float(np.abs(ours - predicted).max())
    print(f"{name}: rlctl checkpoint in LeRobot, max abs diff {diff:.3g}")
    assert diff <= TOLERANCE
