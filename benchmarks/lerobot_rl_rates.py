"""Run by LeRobot 0.6.1's own Python (benchmarks/rl_throughput.py --lerobot-python), never by
rlctl: LeRobot's SAC learner step and its actor's per-transition work on Pendulum's shapes, as
rl_throughput.py times rlctl's, printed as one JSON line.

- learner: `SACAlgorithm.update` (LeRobot's default sizes, utd 1) on batches of 256 sampled from
  LeRobot's own `ReplayBuffer` holding Pendulum-shaped transitions, as its learner samples them;
- actor: `GaussianActorPolicy.select_action` on the observation, then gymnasium's Pendulum step,
  as LeRobot's actor loop does per transition (its robot-env processors and the queue to the
  learner process are left out: LeRobot's actor cannot run Pendulum, only gym-hil or a robot).
"""

from __future__ import annotations

import json
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.gaussian_actor.configuration_gaussian_actor import GaussianActorConfig
from lerobot.policies.gaussian_actor.modeling_gaussian_actor import GaussianActorPolicy
from lerobot.rl.algorithms.sac.configuration_sac import SACAlgorithmConfig
from lerobot.rl.algorithms.sac.sac_algorithm import SACAlgorithm
from lerobot.rl.buffer import ReplayBuffer


def policy() -> GaussianActorPolicy:
    config = GaussianActorConfig(
        device="cpu",
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (3,))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (1,))},
        dataset_stats=None,
    )
    return GaussianActorPolicy(config)


def learner_rate(seconds: float) -> float:
    model = policy()
    model.train()
    algorithm = SACAlgorithm(model, SACAlgorithmConfig.from_policy_config(model.config))
    algorithm.make_optimizers_and_scheduler()
    buffer = ReplayBuffer(capacity=100_000, device="cpu", state_keys=["observation.state"])
    rng = np.random.default_rng(0)
    for _ in range(10_000):
        state = torch.from_numpy(rng.normal(size=(1, 3)).astype(np.float32))
        buffer.add(
            state={"observation.state": state},
            action=torch.from_numpy(rng.uniform(-2, 2, size=(1, 1)).astype(np.float32)),
            reward=float(rng.normal()),
            next_state={"observation.state": state + 0.01},
            done=False,
            truncated=False,
        )

    def batches():
        while True:
            yield buffer.sample(256)

    iterator = batches()
    for _ in range(5):
        algorithm.update(iterator)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        algorithm.update(iterator)
        steps += 1
    return steps / (time.perf_counter() - start)


def actor_rate(seconds: float) -> float:
    model = policy()
    model.eval()
    env = gym.make("Pendulum-v1")
    observation, _ = env.reset(seed=0)
    steps = max(200, int(seconds * 200))
    start = time.perf_counter()
    for _ in range(steps):
        with torch.inference_mode():
            batch = {"observation.state": torch.from_numpy(observation[None].astype(np.float32))}
            action = model.select_action(batch)
        observation, _, terminated, truncated, _ = env.step(action.numpy().reshape(-1))
        if terminated or truncated:
            observation, _ = env.reset()
    return steps / (time.perf_counter() - start)


if __name__ == "__main__":
    seconds, threads = float(sys.argv[1]), int(sys.argv[2])
    if threads:
        torch.set_num_threads(threads)
    print(json.dumps({"learner": learner_rate(seconds), "actor": actor_rate(seconds)}))
