"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_gaussian_actor.py make OUT SPEC_JSON INPUTS_NPZ SEED
        builds a Gaussian actor (every weight randomised, seeded), saves it with its pre/post
        processors in LeRobot's format to OUT, and selects actions
    python lerobot_gaussian_actor.py predict CHECKPOINT INPUTS_NPZ SEED
        loads a checkpoint (LeRobot's or rlctl's) and selects actions

SPEC_JSON: {"cameras": {key: [3, H, W]}, "state_dim", "env_dim" (0: none), "action_dim",
"config": {config fields}}. INPUTS_NPZ holds raw observations `(batch, ...)`. Actions are
sampled as LeRobot's actor does: pre-process the observation, `select_action` right after
torch.manual_seed(SEED), post-process the continuous part (the discrete gripper stays an index).
"""

import json
import sys

import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.policies.gaussian_actor.configuration_gaussian_actor import (
    ActorNetworkConfig,
    CriticNetworkConfig,
    GaussianActorConfig,
    PolicyConfig,
)
from lerobot.policies.gaussian_actor.modeling_gaussian_actor import GaussianActorPolicy
from lerobot.policies.gaussian_actor.processor_gaussian_actor import (
    make_gaussian_actor_pre_post_processors,
)
from lerobot.processor import PolicyProcessorPipeline
from lerobot.processor.converters import (
    batch_to_transition,
    policy_action_to_transition,
    transition_to_batch,
    transition_to_policy_action,
)

NESTED = {
    "actor_network_kwargs": ActorNetworkConfig,
    "discrete_critic_network_kwargs": CriticNetworkConfig,
    "policy_kwargs": PolicyConfig,
}


def select(policy, pre, post, inputs_path, seed):
    data = np.load(inputs_path)
    batch = {k: torch.from_numpy(data[k]) for k in data.files}
    processed = pre.process_observation(batch)
    torch.manual_seed(int(seed))
    with torch.no_grad():
        action = policy.select_action(processed)
    if policy.config.num_discrete_actions is not None:
        return torch.cat([post(action[..., :-1]), action[..., -1:]], dim=-1)
    return post(action)


def stats_for(spec):
    rng = np.random.default_rng(5)

    def tensor(values):
        return torch.tensor(values, dtype=torch.float32)

    stats = {}
    dims = [("observation.state", spec["state_dim"]), ("action", spec["action_dim"])]
    if spec["env_dim"]:
        dims.append(("observation.environment_state", spec["env_dim"]))
    for key, dim in dims:
        low = rng.uniform(-2, 0, size=dim)
        stats[key] = {"min": tensor(low), "max": tensor(low + rng.uniform(0.5, 3, size=dim))}
    for key in spec["cameras"]:
        stats[key] = {
            "mean": tensor(rng.uniform(0.3, 0.6, size=(3, 1, 1))),
            "std": tensor(rng.uniform(0.1, 0.3, size=(3, 1, 1))),
        }
    return stats


def make(out, spec_text, inputs_path, seed):
    spec = json.loads(spec_text)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    if spec["env_dim"]:
        inputs["observation.environment_state"] = PolicyFeature(FeatureType.ENV, (spec["env_dim"],))
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    fields = {k: NESTED[k](**v) if k in NESTED else v for k, v in spec["config"].items()}
    stats = stats_for(spec)
    config = GaussianActorConfig(
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        dataset_stats={
            k: {n: v.flatten().tolist() for n, v in s.items()} for k, s in stats.items()
        },
        **fields,
    )
    torch.manual_seed(3)
    policy = GaussianActorPolicy(config)
    with torch.no_grad():
        for param in policy.parameters():
            param.copy_(torch.randn_like(param) * 0.3)
    pre, post = make_gaussian_actor_pre_post_processors(config, dataset_stats=stats)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    return select(policy.eval(), pre, post, inputs_path, seed)


def predict(folder, inputs_path, seed):
    policy = GaussianActorPolicy.from_pretrained(folder).eval()
    pre = PolicyProcessorPipeline.from_pretrained(
        folder,
        "policy_preprocessor.json",
        to_transition=batch_to_transition,
        to_output=transition_to_batch,
    )
    post = PolicyProcessorPipeline.from_pretrained(
        folder,
        "policy_postprocessor.json",
        to_transition=policy_action_to_transition,
        to_output=transition_to_policy_action,
    )
    return select(policy, pre, post, inputs_path, seed)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    actions = make(*args) if command == "make" else predict(*args)
    print(json.dumps({"actions": actions.tolist()}))
