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

import lerobot_common as common
import numpy as np
import torch
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

NESTED = {
    "actor_network_kwargs": ActorNetworkConfig,
    "discrete_critic_network_kwargs": CriticNetworkConfig,
    "policy_kwargs": PolicyConfig,
}


def select(policy, pre, post, inputs_path, seed):
    processed = pre.process_observation(common.read_tensors(inputs_path))
    torch.manual_seed(int(seed))
    with torch.no_grad():
        action = policy.select_action(processed)
    if policy.config.num_discrete_actions is not None:
        action = torch.cat([post(action[..., :-1]), action[..., -1:]], dim=-1)
    else:
        action = post(action)
    return {"actions": action.tolist()}


def stats_for(spec):
    rng = np.random.default_rng(5)
    dims = [("observation.state", spec["state_dim"]), ("action", spec["action_dim"])]
    if spec["env_dim"]:
        dims.append(("observation.environment_state", spec["env_dim"]))
    return {**common.min_max_stats(rng, dims), **common.mean_std_stats(rng, spec["cameras"])}


def make(out, spec_text, inputs_path, seed):
    spec = json.loads(spec_text)
    shapes = {"observation.state": [spec["state_dim"]]}
    if spec["env_dim"]:
        shapes["observation.environment_state"] = [spec["env_dim"]]
    fields = {k: NESTED[k](**v) if k in NESTED else v for k, v in spec["config"].items()}
    stats = stats_for(spec)
    config = GaussianActorConfig(
        input_features=common.input_features({**shapes, **spec["cameras"]}),
        output_features=common.action_features(spec["action_dim"]),
        device="cpu",
        dataset_stats={
            k: {n: v.flatten().tolist() for n, v in s.items()} for k, s in stats.items()
        },
        **fields,
    )
    torch.manual_seed(3)
    policy = GaussianActorPolicy(config)
    common.randomise(policy, 0.3)
    pre, post = make_gaussian_actor_pre_post_processors(config, dataset_stats=stats)
    common.save(out, policy, pre, post)
    return select(policy.eval(), pre, post, inputs_path, seed)


if __name__ == "__main__":
    common.main(
        {
            "make": make,
            "predict": lambda folder, *args: select(
                *common.load(GaussianActorPolicy, folder), *args
            ),
        },
        deterministic=False,
    )
