"""Multi-task DiT checkpoints both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names a
Python with LeRobot's multi_task_dit extra): a checkpoint LeRobot makes predicts in rlctl the
chunk LeRobot predicts for the same raw inputs, task text and noise (torch's generator seeded
right before sampling on both sides: the first draw, and DDPM's at each step), and a checkpoint
rlctl saves predicts in LeRobot what it predicts in rlctl. Both build on one tiny CLIP folder
(tiny_clip.py), whose config, weights and tokenizer both tools read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="the multi-task DiT needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.domain.policies.multi_task_dit import MultiTaskDiTConfig
from tests.adapters.policies import interop_support as interop

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_multi_task_dit.py"
TOLERANCE = 1e-4
SIZES = {"hidden_dim": 32, "num_layers": 2, "num_heads": 4, "timestep_embed_dim": 16}

SPECS: dict[str, dict[str, Any]] = {
    "two cameras, DDPM": {
        "cameras": {"observation.images.top": [3, 40, 48], "observation.images.wrist": [3, 40, 48]},
        "state_dim": 6,
        "action_dim": 4,
        "tasks": ["pick the cube", ""],
        "config": {
            "horizon": 8,
            "n_action_steps": 4,
            "num_train_timesteps": 20,
            "num_inference_steps": 10,
            "image_resize_shape": [36, 36],
            "image_crop_shape": [32, 32],
            "tokenizer_max_length": 16,
        },
    },
    "separate encoders, DDIM, sample prediction, no rotary": {
        "cameras": {
            "observation.images.front": [3, 32, 32],
            "observation.images.side": [3, 32, 32],
        },
        "state_dim": 3,
        "action_dim": 7,
        "tasks": ["close the drawer", "push the t to the target and then put the bowl away"],
        "config": {
            "n_obs_steps": 1,
            "horizon": 6,
            "n_action_steps": 6,
            "use_separate_rgb_encoder_per_camera": True,
            "noise_scheduler_type": "DDIM",
            "prediction_type": "sample",
            "clip_sample": False,
            "num_train_timesteps": 12,
            "num_inference_steps": 4,
            "use_rope": False,
            "use_positional_encoding": True,
            "image_crop_shape": None,
            "tokenizer_max_length": 8,
        },
    },
    "flow matching, Euler, no camera, left padding": {
        "cameras": {},
        "state_dim": 5,
        "action_dim": 2,
        "tasks": ["put the bowl on the plate", "place the cube"],
        "config": {
            "objective": "flow_matching",
            "num_integration_steps": 6,
            "n_obs_steps": 3,
            "horizon": 10,
            "n_action_steps": 5,
            "tokenizer_padding": "longest",
            "tokenizer_padding_side": "left",
        },
    },
    "flow matching, RK4, crop too large, sigma_min, rope base": {
        "cameras": {"observation.images.top": [3, 32, 32]},
        "state_dim": 4,
        "action_dim": 3,
        "tasks": ["pick the cube", "pick the cube"],
        "config": {
            "objective": "flow_matching",
            "integration_method": "rk4",
            "num_integration_steps": 3,
            "sigma_min": 0.1,
            "rope_base": 100.0,
            "horizon": 5,
            "n_action_steps": 3,
            "image_crop_shape": [48, 48],
            "tokenizer_max_length": 12,
        },
    },
}


def write_inputs(path: Path, spec: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    steps = spec["config"].get("n_obs_steps", 2)
    inputs: dict[str, Any] = {
        "observation.state": rng.normal(size=(2, steps, spec["state_dim"])).astype(np.float32),
        "task": np.array(spec["tasks"]),
    }
    for key, shape in spec["cameras"].items():
        inputs[key] = rng.uniform(size=(2, steps, *shape)).astype(np.float32)
    np.savez(path, **inputs)
    return inputs


def rlctl_chunk(policy, inputs: dict[str, Any], seed: int) -> np.ndarray:
    observation = {k: v for k, v in inputs.items() if k != "task"}
    observation["task"] = [str(t) for t in inputs["task"]]
    torch.manual_seed(seed)
    return policy.predict_chunk(observation).actions.numpy()


def rlctl_stats(spec: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    dims = [("observation.state", spec["state_dim"]), ("action", spec["action_dim"])]
    return {**interop.min_max_stats(rng, dims), **interop.mean_std_stats(rng, spec["cameras"])}


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_predict_the_same_chunks_in_both_tools(
    name: str, lerobot, tiny_clip: Path, tmp_path: Path
) -> None:
    spec = {**SPECS[name], "seed": 7}
    spec["config"] = {**SIZES, **spec["config"]}
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec, seed=3)
    config = spec["config"]
    steps = config.get("n_obs_steps", 2)
    expected_len = min(config["n_action_steps"], config["horizon"] - steps + 1)

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(LEROBOT_SCRIPT, "make", theirs, tiny_clip, json.dumps(spec), inputs_path)
    loaded = load_policy_folder(theirs)
    ours = rlctl_chunk(loaded, inputs, spec["seed"])
    expected = np.array(made["chunk"])
    assert ours.shape == expected.shape == (2, expected_len, spec["action_dim"])
    assert np.ptp(expected) > 1e-3  # the chunk says something (no saturation, no constant)
    interop.assert_close(f"{name}: LeRobot checkpoint in rlctl", ours, expected, TOLERANCE)
    loaded.model.speed_paths = False  # LeRobot's arithmetic step for step
    plain = rlctl_chunk(loaded, inputs, spec["seed"])
    interop.assert_close(f"{name}: the same without the speed paths", plain, expected, TOLERANCE)

    # rlctl's checkpoint (its own random weights and statistics), in LeRobot.
    rlctl_config = MultiTaskDiTConfig(
        input_features=interop.input_features(
            {"observation.state": [spec["state_dim"]], **spec["cameras"]}
        ),
        output_features=interop.action_features(spec["action_dim"]),
        vision_encoder_name=str(tiny_clip),
        text_encoder_name=str(tiny_clip),
        device="cpu",
        **config,
    )
    policy = interop.random_policy(rlctl_config, rlctl_stats(spec), 0.1)
    folder = policy.save(tmp_path / "rlctl_model")
    interop.assert_same_layout(folder, theirs)
    ours = rlctl_chunk(policy, inputs, 13)
    predicted = lerobot(LEROBOT_SCRIPT, "predict", folder, inputs_path, 13)["chunk"]
    interop.assert_close(f"{name}: rlctl checkpoint in LeRobot", ours, predicted, TOLERANCE)
