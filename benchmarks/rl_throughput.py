"""HIL-SERL throughput on the CPU: learner updates per second and actor transitions per second.

    uv run python benchmarks/rl_throughput.py [--seconds 20] [--threads 1] \
        [--lerobot-python /tmp/lerobot-anchor/bin/python] [--rounds 2]

- learner: `TorchSACTrainer` (SAC on a gaussian_actor at LeRobot's default sizes: latent 256,
  actor and critics 256x256, two critics, batch 256, utd 1) on a replay of Pendulum-shaped
  transitions (state 3, action 1), half online and half demonstrations;
- actor: `ActWithPolicy` on gymnasium's Pendulum through the simulated robot (its guard on every
  action), the same policy, the learner's wire in memory (no network): policy + guard + env step +
  bookkeeping per transition.

- latency: an intervention on the actor to the first learner update whose batch holds it,
  `LearnWithSAC` and `ActWithPolicy` in one process over the real gRPC transport on localhost,
  the actor paced at 50 fps, pushing every tick (`--push_every=1`) and at episode ends (the
  default, LeRobot's way); the person takes over one tick per episode (a marked action).

With `--lerobot-python`, LeRobot 0.6.1's figures beside rlctl's (benchmarks/lerobot_rl_rates.py
in its own Python: `SACAlgorithm.update` on its `ReplayBuffer`, and its policy + Pendulum step
per transition), the two alternating round by round so the machine's load hits both alike.
LeRobot's intervention latency is not measured: its actor runs gym-hil or a robot only.

Prints the host line (lscpu's model name, cores, memory, AVX flags). On a shared machine the
figures are noisy: run it a few times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

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


def intervention_latency(seconds: float, push_every: int) -> list[float]:
    """Seconds from each intervention on the actor to the first update whose batch holds it."""
    import threading

    from rlctl.adapters.clock.system import SystemClock
    from rlctl.adapters.remote.grpc_server import GrpcPolicyServer
    from rlctl.adapters.remote.rl_grpc import GrpcLearnerEndpoint, GrpcLearnerLink
    from rlctl.adapters.rl.acting import GaussianActingPolicyFactory, RobotInteraction
    from rlctl.adapters.rl.reward import EnvReward
    from rlctl.adapters.rl.trainer import (
        SafetensorsReplayStore,
        TorchSACTrainerFactory,
        TrainerSettings,
    )
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot
    from rlctl.adapters.sim.envs.gym_generic import GymEnv
    from rlctl.application.use_cases.rl_act import ActSettings, ActWithPolicy
    from rlctl.application.use_cases.rl_learn import LearnSettings, LearnWithSAC
    from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
    from rlctl.domain.rl.replay import TransitionBatch
    from rlctl.domain.rl.sac import SACSettings

    marked: dict[float, float] = {}  # the marked action -> when it was executed
    seen: dict[float, float] = {}  # the marked action -> when an update first held it

    class OneTickPerson:
        def __init__(self) -> None:
            self.tick = 0

        def reset(self) -> None:
            self.tick = 0

        def intervene(self, observation, proposed):  # type: ignore[no-untyped-def]
            self.tick += 1
            if self.tick != 20:
                return None
            value = round(1.0 + 0.001 * len(marked), 4)
            marked[value] = time.perf_counter()
            return np.array([value], np.float32)

    class Watched:
        def __init__(self, trainer) -> None:  # type: ignore[no-untyped-def]
            self._trainer = trainer

        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            return getattr(self._trainer, name)

        def update(self, batches):  # type: ignore[no-untyped-def]
            def watched():  # type: ignore[no-untyped-def]
                for batch in batches:
                    now = time.perf_counter()
                    for value in batch.action[batch.is_intervention.astype(bool), 0]:
                        seen.setdefault(round(float(value), 4), now)
                    yield batch

            return self._trainer.update(watched())

    class WatchedFactory(TorchSACTrainerFactory):
        def create(self, hello):  # type: ignore[no-untyped-def]
            return Watched(super().create(hello))

    factory = WatchedFactory(
        TrainerSettings(policy=GaussianActorConfig(dataset_stats=None), algorithm=SACSettings())
    )
    endpoint = GrpcLearnerEndpoint(GrpcPolicyServer(port=0))
    addresses: list[str] = []
    ready = threading.Event()
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as folder:
        # One demonstration, so an offline buffer exists: interventions go there too (as in
        # LeRobot's learner) and, the buffer being small, the next update samples them.
        demo = TransitionBatch(
            state={"observation.state": np.zeros((1, 3), np.float32)},
            action=np.zeros((1, 1), np.float32),
            reward=np.zeros(1, np.float32),
            next_state={"observation.state": np.zeros((1, 3), np.float32)},
            done=np.ones(1, np.float32),
            truncated=np.zeros(1, np.float32),
            is_intervention=np.zeros(1, bool),
            discrete_penalty=np.zeros(1, np.float32),
        )
        learn = LearnWithSAC(
            endpoint, factory, SafetensorsReplayStore(), SystemClock(), demonstrations=demo
        )
        settings = LearnSettings(
            output_dir=Path(folder),
            online_step_before_learning=1,
            save_freq=10**9,
            push_every_s=1.0,
        )

        def on_ready(address: str) -> None:
            addresses.append(address)
            ready.set()

        thread = threading.Thread(
            target=lambda: learn(settings, on_ready=on_ready, stop=stop), daemon=True
        )
        thread.start()
        ready.wait(60)
        link = GrpcLearnerLink(addresses[0])
        actor = ActWithPolicy(
            link,
            GaussianActingPolicyFactory(),
            RobotInteraction(SimRobot(SimRobotConfig(env=GymEnv(id="Pendulum-v1")))),
            EnvReward(),
            OneTickPerson(),
            SystemClock(),
        )
        actor(ActSettings(steps=int(seconds * 50), fps=50, push_every=push_every))
        time.sleep(2.0)
        stop.set()
        thread.join(60)
        link.close()
    return [seen[v] - t for v, t in marked.items() if v in seen]


def lerobot_rates(python: str, seconds: float, threads: int) -> dict[str, float]:
    script = Path(__file__).resolve().parent / "lerobot_rl_rates.py"
    result = subprocess.run(
        [python, str(script), str(seconds), str(threads)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--lerobot-python", default=None, help="LeRobot 0.6.1's Python")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--latency-seconds", type=float, default=40.0)
    parser.add_argument("--latency-only", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(host_line())
    print(f"torch threads: {torch.get_num_threads()}")
    rows: dict[str, list[float]] = {}
    for _ in range(0 if args.latency_only else args.rounds):
        rows.setdefault("rlctl learner", []).append(learner_rate(args.seconds))
        rows.setdefault("rlctl actor", []).append(actor_rate(args.seconds))
        if args.lerobot_python:
            theirs = lerobot_rates(args.lerobot_python, args.seconds, args.threads)
            rows.setdefault("LeRobot learner", []).append(theirs["learner"])
            rows.setdefault("LeRobot actor", []).append(theirs["actor"])
        print(f"  load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    for name, values in rows.items():
        unit = "SAC updates/s (batch 256)" if "learner" in name else "transitions/s"
        print(
            f"{name:16s} best {max(values):8.1f} {unit}  (rounds: "
            f"{', '.join(f'{v:.1f}' for v in values)})"
        )
    for push_every, label in ((1, "every tick"), (0, "at episode ends")):
        latencies = intervention_latency(args.latency_seconds, push_every)
        if latencies:
            print(
                f"intervention -> update, pushing {label}: median "
                f"{np.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms "
                f"({len(latencies)} interventions; load average {os.getloadavg()[0]:.2f})"
            )


if __name__ == "__main__":
    main()
