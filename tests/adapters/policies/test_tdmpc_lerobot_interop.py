"""TD-MPC checkpoints both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names
LeRobot's Python): a checkpoint LeRobot makes predicts in rlctl the chunks LeRobot predicts for
the same raw inputs and the same draws (torch's generator seeded right before each call on both
sides): MPPI planning twice in a row (the second plan warm-started from the first), or the policy
head alone; the training loss of one batch (model-based losses, the target network, the random
shift) is LeRobot's; and a checkpoint rlctl saves predicts in LeRobot what it predicts in rlctl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.domain.policies.tdmpc import TDMPCConfig
from tests.adapters.policies import interop_support as interop

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_tdmpc.py"
TOLERANCE = 1e-4
SIZES = {
    "latent_dim": 8,
    "mlp_dim": 16,
    "state_encoder_hidden_dim": 16,
    "image_encoder_hidden_dim": 4,
    "n_gaussian_samples": 16,
    "n_pi_samples": 4,
    "n_elites": 5,
    "cem_iterations": 2,
}

SPECS: dict[str, dict[str, Any]] = {
    "camera and state, MPPI, repeated actions, random shift": {
        "inputs": {"observation.image": [3, 64, 64], "observation.state": [4]},
        "action_dim": 3,
        "config": {"horizon": 3},
    },
    "env state and state, MPPI, several steps, two Qs, no penalty, no pi samples": {
        "inputs": {"observation.environment_state": [5], "observation.state": [2]},
        "action_dim": 2,
        "config": {
            "horizon": 4,
            "n_action_steps": 3,
            "n_action_repeats": 1,
            "q_ensemble_size": 2,
            "uncertainty_regularizer_coeff": 0.0,
            "n_pi_samples": 0,
            "discount": 0.8,
        },
    },
    "named camera and state, policy head alone": {
        "inputs": {"observation.images.top": [3, 48, 48], "observation.state": [3]},
        "action_dim": 4,
        "config": {"horizon": 2, "use_mpc": False, "n_action_repeats": 3},
    },
}


def write_inputs(path: Path, spec: dict[str, Any], steps: int | None = None) -> dict:
    """Single-step observations, or (with `steps`) a training batch of `steps` transitions."""
    rng = np.random.default_rng(3)
    lead = (2,) if steps is None else (2, steps + 1)
    out: dict[str, np.ndarray] = {}
    for key, shape in spec["inputs"].items():
        kind = interop.KINDS.get(key)
        values = rng.normal(size=(*lead, *shape)) if kind else rng.uniform(size=(*lead, *shape))
        out[key] = values.astype(np.float32)
    if steps is not None:
        out["action"] = rng.uniform(-1.5, 1.5, size=(2, steps, spec["action_dim"])).astype(
            np.float32
        )
        out["next.reward"] = rng.uniform(size=(2, steps)).astype(np.float32)
        # The second sample's episode ends inside the window: its last steps pad.
        pad = np.zeros((2, steps + 1), bool)
        pad[1, -2:] = True
        out["observation.state_is_pad"] = pad
        out["action_is_pad"] = pad[:, 1:].copy()
        out["next.reward_is_pad"] = pad[:, 1:].copy()
        out["index"] = np.arange(2)
    np.savez(path, **out)
    return out


def rlctl_chunks(policy, inputs: dict[str, Any], seed: int) -> np.ndarray:
    policy.reset()
    chunks = []
    for offset in (0, 1):
        torch.manual_seed(seed + offset)
        chunks.append(policy.predict_chunk(inputs).actions.numpy())
    return np.stack(chunks)


def rlctl_loss(policy, batch: dict[str, Any], seed: int) -> tuple[float, dict]:
    tensors = {k: torch.from_numpy(v) for k, v in batch.items() if k != "index"}
    processed = policy.preprocessor.process_batch(tensors)
    policy.model.train()
    torch.manual_seed(seed)
    np.random.seed(seed)
    loss, parts = policy.model(processed)
    return loss.item(), parts


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_predict_the_same_chunks_and_losses_in_both_tools(
    name: str, lerobot, tmp_path: Path
) -> None:
    spec = {**SPECS[name], "seed": 7}
    spec["config"] = {**SIZES, **spec["config"]}
    config = TDMPCConfig(**spec["config"])
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec)
    steps = config.n_action_repeats if config.n_action_repeats > 1 else config.n_action_steps

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(LEROBOT_SCRIPT, "make", theirs, json.dumps(spec), inputs_path)
    loaded = load_policy_folder(theirs)
    expected = np.array(made["chunks"])
    ours = rlctl_chunks(loaded, inputs, spec["seed"])
    assert ours.shape == expected.shape == (2, 2, steps, spec["action_dim"])
    assert np.ptp(expected) > 1e-3
    interop.assert_close(f"{name}: LeRobot checkpoint in rlctl", ours, expected, TOLERANCE)

    # One training batch's loss.
    batch_path = tmp_path / "batch.npz"
    batch = write_inputs(batch_path, spec, config.horizon)
    theirs_loss = lerobot(LEROBOT_SCRIPT, "loss", theirs, batch_path, 17)
    loss, parts = rlctl_loss(load_policy_folder(theirs), batch, 17)
    interop.assert_same_loss(f"{name}:", loss, parts, theirs_loss)

    # rlctl's checkpoint (its own random weights), in LeRobot.
    rlctl_config = TDMPCConfig(
        input_features=interop.input_features(spec["inputs"]),
        output_features=interop.action_features(spec["action_dim"]),
        device="cpu",
        **spec["config"],
    )
    stats = interop.min_max_stats(np.random.default_rng(5), [("action", spec["action_dim"])])
    policy = interop.random_policy(rlctl_config, stats, 0.3)
    folder = policy.save(tmp_path / "rlctl_model")
    interop.assert_same_layout(folder, theirs)
    ours = rlctl_chunks(policy, inputs, 13)
    predicted = lerobot(LEROBOT_SCRIPT, "predict", folder, inputs_path, 13)["chunks"]
    interop.assert_close(f"{name}: rlctl checkpoint in LeRobot", ours, predicted, TOLERANCE)
