"""VQ-BeT checkpoints both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names
LeRobot's Python): a checkpoint LeRobot makes (its first phase run, so its codebooks followed
real EMA updates) predicts in rlctl the chunk LeRobot predicts for the same raw inputs and the
same sampled codes (torch's generator seeded right before the forward pass on both sides); the
training loss of one batch is LeRobot's in both phases; and a checkpoint rlctl trains through
its first phase and saves predicts in LeRobot what it predicts in rlctl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.domain.policies.vqbet import VQBeTConfig
from tests.adapters.policies import interop_support as interop

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_vqbet.py"
CAMERA = "observation.images.top"
TOLERANCE = 1e-4
SIZES = {
    "pretrained_backbone_weights": None,
    "spatial_softmax_num_keypoints": 4,
    "vqvae_n_embed": 8,
    "vqvae_embedding_dim": 16,
    "vqvae_enc_hidden_dim": 16,
    "gpt_block_size": 40,
    "gpt_input_dim": 16,
    "gpt_output_dim": 24,
    "gpt_n_layer": 2,
    "gpt_n_head": 2,
    "gpt_hidden_dim": 16,
    "dropout": 0.0,
    "n_vqvae_training_steps": 3,
}

# LeRobot sizes its encoder with the backbone in training mode: the feature map must be larger
# than 1x1 (images of 64 pixels or more), or BatchNorm refuses the dry run.
SPECS: dict[str, dict[str, Any]] = {
    "random crop, codes at once": {
        "camera": [3, 68, 76],
        "state_dim": 4,
        "action_dim": 3,
        "config": {
            "n_obs_steps": 3,
            "n_action_pred_token": 2,
            "action_chunk_size": 4,
            "crop_shape": [64, 64],
        },
    },
    "sequential codes, no crop, group norm, one step": {
        "camera": [3, 64, 64],
        "state_dim": 2,
        "action_dim": 5,
        "config": {
            "n_obs_steps": 1,
            "n_action_pred_token": 1,
            "action_chunk_size": 2,
            "crop_shape": None,
            "use_group_norm": True,
            "sequentially_select": True,
            "bet_softmax_temperature": 0.7,
        },
    },
}


def write_inputs(path: Path, spec: dict[str, Any], steps: int, action_steps: int = 0) -> dict:
    rng = np.random.default_rng(3)
    inputs = {
        "observation.state": rng.normal(size=(2, steps, spec["state_dim"])).astype(np.float32),
        CAMERA: rng.uniform(size=(2, steps, *spec["camera"])).astype(np.float32),
    }
    if action_steps:
        shape = (2, action_steps, spec["action_dim"])
        inputs["action"] = rng.uniform(-1.5, 1.5, size=shape).astype(np.float32)
    np.savez(path, **inputs)
    return inputs


def rlctl_chunk(policy, inputs: dict[str, Any], seed: int) -> np.ndarray:
    torch.manual_seed(seed)
    return policy.predict_chunk(inputs).actions.numpy()


def rlctl_loss(policy, batch: dict[str, Any], seed: int, phase: int) -> tuple[float, dict]:
    model = policy.model
    vqvae = model.vqbet.action_head.vqvae_model
    if phase == 1:
        vqvae.discretized.fill_(False)
        vqvae.vq_layer.freeze_codebook.fill_(False)
    processed = policy.preprocessor.process_batch(
        {k: torch.from_numpy(v) for k, v in batch.items()}
    )
    model.train()
    torch.manual_seed(seed)
    loss, parts = model(processed)
    return loss.item(), parts


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_predict_the_same_chunks_and_losses_in_both_tools(
    name: str, lerobot, tmp_path: Path
) -> None:
    spec = {**SPECS[name], "seed": 7}
    spec["config"] = {**SIZES, **spec["config"]}
    config_fields = {k: tuple(v) if isinstance(v, list) else v for k, v in spec["config"].items()}
    steps = spec["config"]["n_obs_steps"]
    chunk = spec["config"]["action_chunk_size"]
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec, steps)

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(LEROBOT_SCRIPT, "make", theirs, json.dumps(spec), inputs_path)
    loaded = load_policy_folder(theirs)
    assert loaded.model.discretized
    expected = np.array(made["chunk"])
    ours = rlctl_chunk(loaded, inputs, spec["seed"])
    assert ours.shape == expected.shape == (2, chunk, spec["action_dim"])
    assert np.ptp(expected) > 1e-3
    interop.assert_close(f"{name}: LeRobot checkpoint in rlctl", ours, expected, TOLERANCE)

    # One training batch's loss, in each phase.
    config = VQBeTConfig(**config_fields)
    batch_path = tmp_path / "batch.npz"
    batch = write_inputs(batch_path, spec, steps, len(config.action_delta_indices))
    for phase in (1, 2):
        theirs_loss = lerobot(LEROBOT_SCRIPT, "loss", theirs, batch_path, 17, phase)
        loss, parts = rlctl_loss(load_policy_folder(theirs), batch, 17, phase)
        interop.assert_same_loss(f"{name}: phase {phase}", loss, parts, theirs_loss)

    # rlctl's checkpoint (its own first phase, random weights), in LeRobot.
    torch.manual_seed(11)
    rlctl_config = VQBeTConfig(
        input_features=interop.input_features(
            {"observation.state": [spec["state_dim"]], CAMERA: spec["camera"]}
        ),
        output_features=interop.action_features(spec["action_dim"]),
        device="cpu",
        **config_fields,
    )
    dims = [("observation.state", spec["state_dim"]), ("action", spec["action_dim"])]
    policy = create_policy(rlctl_config, interop.min_max_stats(np.random.default_rng(5), dims))
    model = policy.model.train()
    while not model.discretized:
        actions = torch.randn(16, len(rlctl_config.action_delta_indices), spec["action_dim"])
        model({"action": actions.clamp(-1, 1)})
    interop.randomise(model, 0.1)
    folder = policy.save(tmp_path / "rlctl_model")
    interop.assert_same_layout(folder, theirs)
    ours = rlctl_chunk(policy, inputs, 13)
    predicted = lerobot(LEROBOT_SCRIPT, "predict", folder, inputs_path, 13)["chunk"]
    interop.assert_close(f"{name}: rlctl checkpoint in LeRobot", ours, predicted, TOLERANCE)
