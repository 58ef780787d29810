"""Gaussian actor (SAC's policy) checkpoints both ways with LeRobot 0.6.1 (run when
RLCTL_LEROBOT_PYTHON names a Python with LeRobot): a checkpoint LeRobot makes selects in rlctl
the actions LeRobot selects for the same raw observations (torch's generator seeded right before
sampling on both sides), and a checkpoint rlctl saves selects in LeRobot what it selects in
rlctl. The processors, config keys and weight names match too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from tests.adapters.policies import interop_support as interop

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_gaussian_actor.py"
TOLERANCE = 1e-4
TINY = {
    "latent_dim": 8,
    "image_encoder_hidden_dim": 4,
    "image_embedding_pooling_dim": 2,
    "actor_network_kwargs": {"hidden_dims": [16, 16]},
    "discrete_critic_network_kwargs": {"hidden_dims": [8, 8]},
}

SPECS: dict[str, dict[str, Any]] = {
    "state only": {"cameras": {}, "state_dim": 4, "env_dim": 0, "action_dim": 3, "config": {}},
    "two cameras, env state, separate encoders, gripper": {
        "cameras": {
            "observation.images.front": [3, 64, 64],
            "observation.images.wrist": [3, 64, 64],
        },
        "state_dim": 6,
        "env_dim": 2,
        "action_dim": 3,
        "config": {"shared_encoder": False, "num_discrete_actions": 3},
    },
    "one camera, shared encoder, trainable CNN, final activation": {
        "cameras": {"observation.image": [3, 64, 80]},
        "state_dim": 2,
        "env_dim": 0,
        "action_dim": 4,
        "config": {
            "freeze_vision_encoder": False,
            "actor_network_kwargs": {"hidden_dims": [8], "activate_final": False},
            "policy_kwargs": {"std_min": 0.01, "std_max": 2.0, "init_final": 0.1},
        },
    },
}


def write_inputs(path: Path, spec: dict[str, Any]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    inputs = {"observation.state": rng.normal(size=(2, spec["state_dim"])).astype(np.float32)}
    if spec["env_dim"]:
        inputs["observation.environment_state"] = rng.normal(size=(2, spec["env_dim"])).astype(
            np.float32
        )
    for key, shape in spec["cameras"].items():
        inputs[key] = rng.uniform(size=(2, *shape)).astype(np.float32)
    np.savez(path, **inputs)
    return inputs


def rlctl_actions(policy, inputs: dict[str, np.ndarray], seed: int) -> np.ndarray:
    torch.manual_seed(seed)
    return policy.predict_chunk(inputs).actions[:, 0].numpy()


def rlctl_stats(spec: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(9)
    dims = [("observation.state", spec["state_dim"]), ("action", spec["action_dim"])]
    if spec["env_dim"]:
        dims.append(("observation.environment_state", spec["env_dim"]))
    return {**interop.min_max_stats(rng, dims), **interop.mean_std_stats(rng, spec["cameras"])}


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_select_the_same_actions_in_both_tools(
    name: str, lerobot, tmp_path: Path
) -> None:
    spec = {**SPECS[name]}
    spec["config"] = {**TINY, **spec["config"]}
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec)

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(LEROBOT_SCRIPT, "make", theirs, json.dumps(spec), inputs_path, 17)
    loaded = load_policy_folder(theirs)
    expected = np.array(made["actions"])
    discrete = spec["config"].get("num_discrete_actions") is not None
    assert expected.shape == (2, spec["action_dim"] + int(discrete))
    ours = rlctl_actions(loaded, inputs, 17)
    interop.assert_close(f"{name}: LeRobot checkpoint in rlctl", ours, expected, TOLERANCE)
    assert np.ptp(expected[:, : spec["action_dim"]]) > 1e-3

    # rlctl's checkpoint (its own random weights and statistics), in LeRobot.
    shapes = {"observation.state": [spec["state_dim"]], **spec["cameras"]}
    if spec["env_dim"]:
        shapes["observation.environment_state"] = [spec["env_dim"]]
    config = GaussianActorConfig(
        input_features=interop.input_features(shapes),
        output_features=interop.action_features(spec["action_dim"]),
        **spec["config"],
    )
    policy = interop.random_policy(config, rlctl_stats(spec), 0.3)
    folder = policy.save(tmp_path / "rlctl_model")
    interop.assert_same_layout(folder, theirs)
    ours = rlctl_actions(policy, inputs, 23)
    predicted = lerobot(LEROBOT_SCRIPT, "predict", folder, inputs_path, 23)["actions"]
    interop.assert_close(f"{name}: rlctl checkpoint in LeRobot", ours, predicted, TOLERANCE)
