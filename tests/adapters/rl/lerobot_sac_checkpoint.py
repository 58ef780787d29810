"""LeRobot 0.6.1's side of the learner-checkpoint interop test (run with RLCTL_LEROBOT_PYTHON).

    python lerobot_sac_checkpoint.py write DIR   LeRobot's SAC learner trains 3 steps on random
                                                 batches and checkpoints into DIR as its
                                                 `save_training_checkpoint` does (the policy, its
                                                 processors, `algorithm/`, `training_state/`)
    python lerobot_sac_checkpoint.py read DIR    LeRobot's learner resumes DIR as its
                                                 `load_training_state` does, then trains a step

Prints one JSON line: the step, the interaction step, log_alpha, and per optimiser the sum of
each parameter's first Adam moment (`exp_avg`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from lerobot.common.train_utils import load_training_state, save_training_state
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.gaussian_actor.configuration_gaussian_actor import (
    ActorNetworkConfig,
    CriticNetworkConfig,
    GaussianActorConfig,
)
from lerobot.policies.gaussian_actor.modeling_gaussian_actor import GaussianActorPolicy
from lerobot.policies.gaussian_actor.processor_gaussian_actor import (
    make_gaussian_actor_pre_post_processors,
)
from lerobot.rl.algorithms.sac.configuration_sac import SACAlgorithmConfig
from lerobot.rl.algorithms.sac.sac_algorithm import SACAlgorithm
from lerobot.utils.constants import ALGORITHM_DIR, PRETRAINED_MODEL_DIR, TRAINING_STATE_DIR
from safetensors.torch import load_file

STATS = {
    "observation.state": {"min": torch.tensor([-1.0, -1.0]), "max": torch.tensor([1.0, 1.0])},
    "action": {"min": torch.tensor([-1.0]), "max": torch.tensor([1.0])},
}


def policy_config() -> GaussianActorConfig:
    # What the rlctl test's `config()` makes.
    return GaussianActorConfig(
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (2,))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (1,))},
        latent_dim=8,
        state_encoder_hidden_dim=8,
        actor_network_kwargs=ActorNetworkConfig(hidden_dims=[16]),
        device="cpu",
    )


def algorithm_for(policy: GaussianActorPolicy) -> SACAlgorithm:
    config = SACAlgorithmConfig(
        policy_config=policy.config,
        critic_network_kwargs=CriticNetworkConfig(hidden_dims=[16]),
        temperature_init=0.1,
    )
    algorithm = SACAlgorithm(policy, config)
    algorithm.make_optimizers_and_scheduler()
    return algorithm


def batches(seed: int):  # type: ignore[no-untyped-def]
    generator = torch.Generator().manual_seed(seed)
    while True:
        state = torch.rand(16, 2, generator=generator) * 2 - 1
        action = torch.rand(16, 1, generator=generator) * 2 - 1
        yield {
            "state": {"observation.state": state},
            "next_state": {"observation.state": state},
            "action": action,
            "reward": -(action[:, 0] - state[:, 0]).abs(),
            "done": torch.ones(16),
        }


def summary(algorithm: SACAlgorithm) -> dict[str, list[float]]:
    out = {}
    for name, optimizer in algorithm.get_optimizers().items():
        state = optimizer.state_dict()["state"]
        out[name] = [float(state[i]["exp_avg"].double().sum()) for i in sorted(state)]
    return out


def write(folder: Path) -> dict:
    torch.manual_seed(0)
    config = policy_config()
    policy = GaussianActorPolicy(config)
    algorithm = algorithm_for(policy)
    source = batches(1)
    for _ in range(3):
        algorithm.update(source)
    step = algorithm.optimization_step
    # `save_training_checkpoint` without its train_config.json and replay datasets.
    pre, post = make_gaussian_actor_pre_post_processors(config, dataset_stats=STATS)
    policy.save_pretrained(folder / PRETRAINED_MODEL_DIR)
    pre.save_pretrained(folder / PRETRAINED_MODEL_DIR)
    post.save_pretrained(folder / PRETRAINED_MODEL_DIR)
    save_training_state(folder, step, algorithm.get_optimizers(), None)
    algorithm.save_pretrained(folder / ALGORITHM_DIR)
    (folder / TRAINING_STATE_DIR / "training_step.json").write_text(
        json.dumps({"step": step, "interaction_step": 96})
    )
    return {
        "step": step,
        "interaction_step": 96,
        "log_alpha": float(algorithm.log_alpha.item()),
        "optimizers": summary(algorithm),
    }


def read(folder: Path) -> dict:
    policy = GaussianActorPolicy.from_pretrained(folder / PRETRAINED_MODEL_DIR)
    algorithm = algorithm_for(policy)
    # The learner's `load_training_state`: optimisers (LeRobot's strict reader of the param
    # groups), generators and step, then the algorithm's tensors.
    step, _, _ = load_training_state(folder, algorithm.get_optimizers(), None)
    algorithm.load_state_dict(load_file(str(folder / ALGORITHM_DIR / "model.safetensors")))
    algorithm.optimization_step = step
    saved = json.loads((folder / TRAINING_STATE_DIR / "training_step.json").read_text())
    out = {
        "step": step,
        "interaction_step": int(saved.get("interaction_step", 0)),
        "log_alpha": float(algorithm.log_alpha.item()),
        "optimizers": summary(algorithm),
    }
    algorithm.update(batches(2))
    out["stepped"] = algorithm.optimization_step == step + 1
    return out


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2])
    print(json.dumps(write(where) if mode == "write" else read(where)))
