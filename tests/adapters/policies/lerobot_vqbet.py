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
import sys

import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.policies.vqbet.configuration_vqbet import VQBeTConfig
from lerobot.policies.vqbet.modeling_vqbet import VQBeTPolicy
from lerobot.policies.vqbet.processor_vqbet import make_vqbet_pre_post_processors
from lerobot.processor import PolicyProcessorPipeline
from lerobot.processor.converters import (
    batch_to_transition,
    policy_action_to_transition,
    transition_to_batch,
    transition_to_policy_action,
)

CAMERA = "observation.images.top"


def predict(policy, pre, post, inputs_path, seed):
    data = np.load(inputs_path)
    batch = pre({k: torch.from_numpy(data[k]) for k in data.files})
    batch["observation.images"] = torch.stack(
        [batch[k] for k in policy.config.image_features], dim=-4
    )
    policy.eval()
    torch.manual_seed(int(seed))
    with torch.no_grad():
        chunk = policy.vqbet(batch, rollout=True)[:, : policy.config.action_chunk_size]
    return post(chunk)


def stats_for(spec):
    rng = np.random.default_rng(spec["seed"])
    stats = {}
    for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"])):
        low = rng.uniform(-2, 0, size=dim)
        stats[key] = {
            "min": torch.tensor(low, dtype=torch.float32),
            "max": torch.tensor(low + rng.uniform(0.5, 3, size=dim), dtype=torch.float32),
        }
    return stats


def make(out, spec_text, inputs_path):
    spec = json.loads(spec_text)
    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],)),
        CAMERA: PolicyFeature(FeatureType.VISUAL, tuple(spec["camera"])),
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in spec["config"].items()}
    config = VQBeTConfig(input_features=inputs, output_features=outputs, device="cpu", **fields)
    torch.manual_seed(spec["seed"])
    policy = VQBeTPolicy(config)
    policy.train()
    steps = len(config.action_delta_indices)
    while not policy.vqbet.action_head.vqvae_model.discretized.item():
        actions = torch.randn(16, steps, spec["action_dim"]).clamp(-1, 1)
        policy.vqbet.action_head.discretize(config.n_vqvae_training_steps, actions)
    with torch.no_grad():
        for param in policy.parameters():
            param.copy_(torch.randn_like(param) * spec.get("scale", 0.1))
    pre, post = make_vqbet_pre_post_processors(config, stats_for(spec))
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    return predict(policy, pre, post, inputs_path, spec["seed"])


def load(folder):
    policy = VQBeTPolicy.from_pretrained(folder)
    policy.eval()
    pre = PolicyProcessorPipeline.from_pretrained(
        folder,
        config_filename="policy_preprocessor.json",
        to_transition=batch_to_transition,
        to_output=transition_to_batch,
    )
    post = PolicyProcessorPipeline.from_pretrained(
        folder,
        config_filename="policy_postprocessor.json",
        to_transition=policy_action_to_transition,
        to_output=transition_to_policy_action,
    )
    return policy, pre, post


def loss(folder, batch_path, seed, phase):
    policy, pre, _ = load(folder)
    data = np.load(batch_path)
    batch = pre({k: torch.from_numpy(data[k]) for k in data.files})
    vqvae = policy.vqbet.action_head.vqvae_model
    if phase == "1":
        vqvae.discretized.fill_(False)
        vqvae.vq_layer.freeze_codebook.fill_(False)
    policy.train()
    torch.manual_seed(int(seed))
    value, parts = policy.forward(batch)
    return {"loss": value.item(), "parts": {k: float(v) for k, v in parts.items()}}


def main():
    torch.use_deterministic_algorithms(True)
    mode = sys.argv[1]
    if mode == "loss":
        print(json.dumps(loss(*sys.argv[2:6])))
        return
    if mode == "make":
        chunk = make(*sys.argv[2:5])
    elif mode == "predict":
        chunk = predict(*load(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"chunk": chunk.detach().cpu().double().tolist()}))


if __name__ == "__main__":
    main()
