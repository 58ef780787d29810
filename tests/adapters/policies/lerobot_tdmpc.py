"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_tdmpc.py make OUT SPEC_JSON INPUTS_NPZ
        builds a tiny TD-MPC (seeded), randomises every weight (model and target), saves it with
        its processors in LeRobot's format to OUT and predicts two chunks in a row
    python lerobot_tdmpc.py predict CHECKPOINT INPUTS_NPZ SEED
        loads a checkpoint (LeRobot's or rlctl's) and predicts two chunks in a row (the second
        plan warm-started from the first, as while acting)
    python lerobot_tdmpc.py loss CHECKPOINT BATCH_NPZ SEED
        the training loss and its parts on one pre-processed batch

SPEC_JSON: {"inputs": {key: [shape]}, "action_dim", "config": {fields}, "seed"}. INPUTS_NPZ: raw
single-step observations `(batch, ...)`. torch's (and for the loss numpy's) generator is seeded
with SEED, then SEED + 1 for the second chunk, right before each call.
"""

import json
import sys

import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.policies.tdmpc.configuration_tdmpc import TDMPCConfig
from lerobot.policies.tdmpc.modeling_tdmpc import TDMPCPolicy
from lerobot.policies.tdmpc.processor_tdmpc import make_tdmpc_pre_post_processors
from lerobot.processor import PolicyProcessorPipeline
from lerobot.processor.converters import (
    batch_to_transition,
    policy_action_to_transition,
    transition_to_batch,
    transition_to_policy_action,
)

KINDS = {
    "observation.state": FeatureType.STATE,
    "observation.environment_state": FeatureType.ENV,
}


def chunk_of(policy, batch):
    """LeRobot's predict_action_chunk and select_action's queue filling, without the queues."""
    config = policy.config
    batch = dict(batch)
    keys = []
    if config.image_features:
        batch["observation.image"] = batch[next(iter(config.image_features))]
        keys.append("observation.image")
    if config.env_state_feature:
        keys.append("observation.environment_state")
    if config.robot_state_feature:
        keys.append("observation.state")
    observation = {k: batch[k] for k in keys}
    if config.image_features:
        # LeRobot's encoder reads the camera under its own key, which predict_action_chunk
        # filters out for any camera not named observation.image (acting fails there).
        camera = next(iter(config.image_features))
        observation[camera] = batch[camera]
    z = policy.model.encode(observation)
    actions = policy.plan(z) if config.use_mpc else policy.model.pi(z).unsqueeze(0)
    actions = torch.clamp(actions, -1, 1)
    if config.n_action_repeats > 1:
        actions = actions[:1].repeat(config.n_action_repeats, 1, 1)
    else:
        actions = actions[: config.n_action_steps]
    return actions.transpose(0, 1)


def predict(policy, pre, post, inputs_path, seed):
    data = np.load(inputs_path)
    batch = pre({k: torch.from_numpy(data[k]) for k in data.files})
    policy.eval()
    policy.reset()
    chunks = []
    with torch.no_grad():
        for offset in (0, 1):
            torch.manual_seed(int(seed) + offset)
            chunks.append(post(chunk_of(policy, batch)))
    return torch.stack(chunks)


def stats_for(spec):
    rng = np.random.default_rng(spec["seed"])
    low = rng.uniform(-2, 0, size=spec["action_dim"])
    return {
        "action": {
            "min": torch.tensor(low, dtype=torch.float32),
            "max": torch.tensor(
                low + rng.uniform(0.5, 3, size=spec["action_dim"]), dtype=torch.float32
            ),
        }
    }


def make(out, spec_text, inputs_path):
    spec = json.loads(spec_text)
    inputs = {
        key: PolicyFeature(KINDS.get(key, FeatureType.VISUAL), tuple(shape))
        for key, shape in spec["inputs"].items()
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    config = TDMPCConfig(
        input_features=inputs, output_features=outputs, device="cpu", **spec["config"]
    )
    torch.manual_seed(spec["seed"])
    policy = TDMPCPolicy(config)
    with torch.no_grad():
        for param in policy.parameters():
            param.copy_(torch.randn_like(param) * spec.get("scale", 0.3))
    pre, post = make_tdmpc_pre_post_processors(config, stats_for(spec))
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    return predict(policy, pre, post, inputs_path, spec["seed"])


def load(folder):
    policy = TDMPCPolicy.from_pretrained(folder)
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


def loss(folder, batch_path, seed):
    policy, pre, _ = load(folder)
    data = np.load(batch_path)
    batch = pre({k: torch.from_numpy(data[k]) for k in data.files})
    policy.train()
    torch.manual_seed(int(seed))
    np.random.seed(int(seed))
    value, parts = policy.forward(batch)
    return {
        "loss": value.item(),
        "parts": {k: float(v) for k, v in parts.items() if k != "advantage"},
    }


def main():
    torch.use_deterministic_algorithms(True)
    mode = sys.argv[1]
    if mode == "loss":
        print(json.dumps(loss(*sys.argv[2:5])))
        return
    if mode == "make":
        chunks = make(*sys.argv[2:5])
    elif mode == "predict":
        chunks = predict(*load(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"chunks": chunks.detach().cpu().double().tolist()}))


if __name__ == "__main__":
    main()
