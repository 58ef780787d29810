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

import lerobot_common as common
import numpy as np
import torch
from lerobot.policies.tdmpc.configuration_tdmpc import TDMPCConfig
from lerobot.policies.tdmpc.modeling_tdmpc import TDMPCPolicy
from lerobot.policies.tdmpc.processor_tdmpc import make_tdmpc_pre_post_processors


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
    batch = pre(common.read_tensors(inputs_path))
    policy.eval()
    policy.reset()
    chunks = []
    with torch.no_grad():
        for offset in (0, 1):
            torch.manual_seed(int(seed) + offset)
            chunks.append(post(chunk_of(policy, batch)))
    return torch.stack(chunks)


def make(out, spec_text, inputs_path):
    spec = json.loads(spec_text)
    config = TDMPCConfig(
        input_features=common.input_features(spec["inputs"]),
        output_features=common.action_features(spec["action_dim"]),
        device="cpu",
        **spec["config"],
    )
    torch.manual_seed(spec["seed"])
    policy = TDMPCPolicy(config)
    common.randomise(policy, spec.get("scale", 0.3))
    stats = common.min_max_stats(
        np.random.default_rng(spec["seed"]), [("action", spec["action_dim"])]
    )
    pre, post = make_tdmpc_pre_post_processors(config, stats)
    common.save(out, policy, pre, post)
    return predict(policy, pre, post, inputs_path, spec["seed"])


def loss(folder, batch_path, seed):
    policy, pre, _ = common.load(TDMPCPolicy, folder)
    batch = pre(common.read_tensors(batch_path))
    policy.train()
    torch.manual_seed(int(seed))
    np.random.seed(int(seed))
    value, parts = policy.forward(batch)
    return {
        "loss": value.item(),
        "parts": {k: float(v) for k, v in parts.items() if k != "advantage"},
    }


if __name__ == "__main__":
    common.main({**common.chunk_commands("chunks", TDMPCPolicy, make, predict), "loss": loss})
