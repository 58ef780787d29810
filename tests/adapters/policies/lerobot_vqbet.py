"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_vqbet.py make OUT SPEC_JSON INPUTS_NPZ
        builds a tiny VQ-BeT (seeded), runs its first phase (the residual VQ, EMA codebooks) on
        random actions until it is discretized, randomises every weight, saves it with its
        processors in LeRobot's format to OUT and predicts a chunk
    python lerobot_vqbet.py predict CHECKPOINT INPUTS_NPZ SEED
        loads a checkpoint (LeRobot's or rlctl's) and predicts a chunk
    python lerobot_vqbet.py loss CHECKPOINT BATCH_NPZ SEED PHASE
        the training loss (and its parts) of one pre-processed batch, in train mode, in phase
        1 (the VQ-VAE: the checkpoint's quantiser un-discretized) or 2 (the GPT)

SPEC_JSON: {"camera": [3, H, W], "state_dim", "action_dim", "config": {fields}, "seed"}.
INPUTS_NPZ: raw `observation.state` and the camera as `(batch, n_obs_steps, ...)` histories.
The codes are sampled from torch's generator seeded with SEED right before the forward pass.
"""

import json

import lerobot_common as common
import numpy as np
import torch
from lerobot.policies.vqbet.configuration_vqbet import VQBeTConfig
from lerobot.policies.vqbet.modeling_vqbet import VQBeTPolicy
from lerobot.policies.vqbet.processor_vqbet import make_vqbet_pre_post_processors

CAMERA = "observation.images.top"


def predict(policy, pre, post, inputs_path, seed):
    batch = pre(common.read_tensors(inputs_path))
    batch["observation.images"] = torch.stack(
        [batch[k] for k in policy.config.image_features], dim=-4
    )
    policy.eval()
    torch.manual_seed(int(seed))
    with torch.no_grad():
        chunk = policy.vqbet(batch, rollout=True)[:, : policy.config.action_chunk_size]
    return post(chunk)


def make(out, spec_text, inputs_path):
    spec = json.loads(spec_text)
    config = VQBeTConfig(
        input_features=common.input_features(
            {"observation.state": [spec["state_dim"]], CAMERA: spec["camera"]}
        ),
        output_features=common.action_features(spec["action_dim"]),
        device="cpu",
        **common.config_fields(spec["config"]),
    )
    torch.manual_seed(spec["seed"])
    policy = VQBeTPolicy(config)
    policy.train()
    steps = len(config.action_delta_indices)
    while not policy.vqbet.action_head.vqvae_model.discretized.item():
        actions = torch.randn(16, steps, spec["action_dim"]).clamp(-1, 1)
        policy.vqbet.action_head.discretize(config.n_vqvae_training_steps, actions)
    common.randomise(policy, spec.get("scale", 0.1))
    dims = [("observation.state", spec["state_dim"]), ("action", spec["action_dim"])]
    pre, post = make_vqbet_pre_post_processors(
        config, common.min_max_stats(np.random.default_rng(spec["seed"]), dims)
    )
    common.save(out, policy, pre, post)
    return predict(policy, pre, post, inputs_path, spec["seed"])


def loss(folder, batch_path, seed, phase):
    policy, pre, _ = common.load(VQBeTPolicy, folder)
    batch = pre(common.read_tensors(batch_path))
    vqvae = policy.vqbet.action_head.vqvae_model
    if phase == "1":
        vqvae.discretized.fill_(False)
        vqvae.vq_layer.freeze_codebook.fill_(False)
    policy.train()
    torch.manual_seed(int(seed))
    value, parts = policy.forward(batch)
    return {"loss": value.item(), "parts": {k: float(v) for k, v in parts.items()}}


if __name__ == "__main__":
    common.main({**common.chunk_commands("chunk", VQBeTPolicy, make, predict), "loss": loss})
