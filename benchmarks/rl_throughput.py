"""HIL-SERL throughput on the CPU: learner updates per second and actor transitions per second.

    uv run python benchmarks/rl_throughput.py [--seconds 20] [--threads 1]

- learner: `TorchSACTrainer` (SAC on a gaussian_actor at LeRobot's default sizes: latent 256,
  actor and critics 256x256, two critics, batch 256, utd 1) on a replay of Pendulum-shaped
  transitions (state 3, action 1), half online and half demonstrations;
- actor: `ActWithPolicy` on gymnasium's Pendulum through the simulated robot (its guard on every
  action), the same policy, the learner's wire in memory (no network): policy + guard + env step +
  bookkeeping per transition.

Prints the host line (lscpu's model name, cores, memory, AVX flags). On a shared machine the
figures are noisy: run it a few times.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

import numpy as np
import torch


def host_line() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        lscpu = ""
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in lscpu.splitlines())
    )
    flags = sorted(f for f in fields.get("Flags", "").split() if f.startswith("avx"))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"host: {fields.get('Model name', 'unknown CPU')}, {os.cpu_count()} cores, "
        f"{memory:.0f} GiB, {' '.join(flags) or 'no AVX'}"
    )


def learner_rate(seconds: float) -> float:
    from rlctl.adapters.rl.trainer import TorchSACTrainerFactory, TrainerSettings
    from rlctl.application.ports.reinforcement import ActorHello
    from rlctl.domain.features import FeatureSpec
    from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
    from rlctl.domain.rl.replay import Replay, ReplayBuffer, TransitionBatch
    from rlctl.domain.rl.sac import SACSettings

    features = {
        "observation.state": FeatureSpec("observation.state", "float32", (3,)),
        "action": FeatureSpec("action", "float32", (1,)),
    }
    hello = ActorHello(features, np.array([-2.0]), np.array([2.0]))
    factory = TorchSACTrainerFactory(
        TrainerSettings(policy=GaussianActorConfig(dataset_stats=None), algorithm=SACSettings())
    )
    trainer = factory.create(hello)
    rng = np.random.default_rng(0)

    def batch(n: int) -> TransitionBatch:
        state = rng.normal(size=(n, 3)).astype(np.float32)
        return TransitionBatch(
            state={"observation.state": state},
            action=rng.uniform(-2, 2, size=(n, 1)).astype(np.float32),
            reward=rng.normal(size=n).astype(np.float32),
            next_state={"observation.state": state + 0.01},
            done=np.zeros(n, np.float32),
            truncated=np.zeros(n, np.float32),
            is_intervention=np.zeros(n, bool),
            discrete_penalty=np.zeros(n, np.float32),
        )

    online, offline = ReplayBuffer(100_000), ReplayBuffer(100_000)
    online.extend(batch(10_000))
    offline.extend(batch(10_000))
    replay = Replay(online, offline)

    def batches():
        while True:
            yield replay.sample(256, rng)

    for _ in range(5):  # warm-up
        trainer.update(batches())
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        trainer.update(batches())
        steps += 1
    return steps / (time.perf_counter() - start)


def actor_rate(seconds: float) -> float:
    from rlctl.adapters.clock.system import SystemClock
    from rlctl.adapters.memory.reinforcement import InMemoryLearnerWire
    from rlctl.adapters.rl.acting import GaussianActingPolicyFactory, RobotInteraction
    from rlctl.adapters.rl.reward import EnvReward, NoIntervention
    from rlctl.adapters.rl.trainer import TorchSACTrainerFactory, TrainerSettings
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot
    from rlctl.adapters.sim.envs.gym_generic import GymEnv
    from rlctl.application.use_cases.rl_act import ActSettings, ActWithPolicy
    from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
    from rlctl.domain.rl.sac import SACSettings

    wire = InMemoryLearnerWire()
    factory = TorchSACTrainerFactory(
        TrainerSettings(policy=GaussianActorConfig(dataset_stats=None), algorithm=SACSettings())
    )
    wire.endpoint.start(lambda hello: factory.create(hello).description, lambda batch: None)
    robot = SimRobot(SimRobotConfig(env=GymEnv(id="Pendulum-v1")))
    use_case = ActWithPolicy(
        wire.link,
        GaussianActingPolicyFactory(),
        RobotInteraction(robot),
        EnvReward(),
        NoIntervention(),
        SystemClock(),
    )
    use_case(ActSettings(steps=50))  # warm-up (builds the policy)
    robot = SimRobot(SimRobotConfig(env=GymEnv(id="Pendulum-v1")))
    use_case = ActWithPolicy(
        wire.link,
        GaussianActingPolicyFactory(),
        RobotInteraction(robot),
        EnvReward(),
        NoIntervention(),
        SystemClock(),
    )
    steps = max(200, int(seconds * 200))
    start = time.perf_counter()
    result = use_case(ActSettings(steps=steps))
    return result.steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(host_line())
    print(f"torch threads: {torch.get_num_threads()}")
    print(f"learner: {learner_rate(args.seconds):.1f} SAC updates/s (batch 256, LeRobot's sizes)")
    print(f"actor: {actor_rate(args.seconds):.0f} transitions/s (Pendulum, sim robot, no network)")


if __name__ == "__main__":
    main()
