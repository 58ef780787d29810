"""HIL-SERL learning check in simulation: `rlctl rl learn` + `rlctl rl act` on gymnasium's
Pendulum (swing up and balance), a scripted person intervening in a few early episodes, over a
fixed budget of episodes; prints the return of every episode and whether it rose.

    uv run python benchmarks/rl_learning.py [--episodes 30] [--fps 100] [--help-episodes 5]
    uv run python benchmarks/rl_learning.py --task pick-cube --episodes 80 --fps 10 \
        --help-from 1 --help-episodes 10

The learner is the `rlctl rl learn` command in its own process; the actor is `rlctl rl act` in
its own process too (the same command, its intervention source swapped for the scripted person
through the container, as the tests swap adapters), on the simulated robot (its guard on every
action), the two talking over the gRPC transport on localhost. The person is an energy-pumping
swing-up with a PD balance; in the episodes it helps, it takes over the first `--help-ticks`
ticks (their transitions are tagged `is_intervention`; with no demonstrations dataset the
learner keeps no offline buffer, as LeRobot's does not, so they are sampled with the rest). The
actor is paced at `--fps` so the learner's updates per transition do not depend on how fast the
simulator steps.

`--task pick-cube` runs gym-hil's PandaPickCube instead, state-only
(`--robot.env.type=hil --robot.env.obs_type=environment_state_agent_pos`: the arm's 18 values
and the cube's position, no cameras), at gym-hil's 10 Hz, its sparse reward (1 when the cube is
lifted 10 cm, which ends the episode), 100 ticks an episode, the cube where gym-hil puts it by
default (the same place each episode; `random_block_position` is off in gym-hil's own
registration too); the person is a scripted grasp (over the cube, down, close, lift) that
takes whole episodes over. The learner runs LeRobot's HIL-SERL recipe for this task
(`PICK_RECIPE`: a discrete gripper with its own critic, discount 0.97, temperature 0.01 to
start, two critic updates per step, the arm's state min-max normalised: with the ranges the env
knows by default, with the recipe's recorded statistics under `--stats=recipe`) at small sizes. It
prints the success of every episode, the policy's success alone early and late and by blocks
of 10 of its episodes, the SAC updates per second and the transitions per second. With cameras
(128x128 frames, a ResNet-10 encoder per critic) gym-hil's tasks take hours of GPU training;
state-only, the policy alone goes from failing to lifting the cube in most episodes within
about 40 episodes here. LeRobot 0.6.1's actor/learner cannot be given this task: its
`make_robot_env` builds gym-hil (`gym_hil/<task>`, with render_mode="human") or a real robot,
nothing else.

Prints the host line and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_size import host_line

SMALL = [
    "--policy.latent_dim=64",
    "--policy.actor_network_kwargs.hidden_dims=[64,64]",
    "--algorithm.critic_network_kwargs.hidden_dims=[64,64]",
    "--batch_size=128",
    "--push_every_s=1",
    "--save_freq=1000000",
]


# LeRobot's HIL-SERL recipe for gym-hil's PandaPickCube (its example learner config,
# `cuda_train_gym_hil_env_learner.json`), at the sizes above: a discrete gripper (3 commands, its
# own critic), discount 0.97, temperature 0.01 to start, two critic updates per step, gradients
# clipped at 10, std at most 5; the arm's 18 values min-max normalised with that config's
# statistics, the cube's position with gym-hil's workspace; the end-effector deltas take the
# robot's bounds, [-1, 1] (the learner's default when no action statistics are given).
ARM_MIN = [
    -0.6897, -1.1422, -0.5745, -2.9783, -0.2711, 1.3247, -0.0406, -0.2126, -0.4548, -0.6540,
    -0.3645, -1.1058, -0.4077, -0.2220, 0.0, 0.1918, -0.3013, 0.0036,
]  # fmt: skip
ARM_MAX = [
    0.5107, 0.5516, 0.5621, -1.3331, 0.3276, 3.1196, 1.8364, 0.2536, 0.3632, 0.1477, 0.4995,
    0.1448, 0.2821, 0.7382, 255.0, 0.6013, 0.3006, 0.5004,
]  # fmt: skip
PICK_STATS = {
    "observation.state": {"min": ARM_MIN, "max": ARM_MAX},
    "observation.environment_state": {"min": [0.2, -0.3, 0.0], "max": [0.6, 0.3, 0.5]},
}
# `--stats=recipe` gives the recipe's recorded statistics; by default the learner takes the
# ranges the env knows (the arm's joint ranges and speeds, the gripper's 0-255, the workspace).
RECIPE_STATS = f"--policy.dataset_stats={json.dumps(PICK_STATS)}"
PICK_RECIPE = [
    "--policy.num_discrete_actions=3",
    "--policy.policy_kwargs.std_max=5",
    "--algorithm.discount=0.97",
    "--algorithm.temperature_init=0.01",
    "--algorithm.utd_ratio=2",
    "--algorithm.grad_clip_norm=10",
]


class ScriptedPerson:
    """Swings the pendulum up by pumping energy and balances it with a PD law, for the first
    `ticks` ticks of the episodes in `episodes` (counted from 1)."""

    def __init__(self, episodes: range, ticks: int) -> None:
        self.episodes = episodes
        self.ticks = ticks
        self.episode = 0
        self.tick = 0
        self.taken: list[int] = []

    def reset(self) -> None:
        self.episode += 1
        self.tick = 0
        self.taken.append(0)

    def intervene(self, observation: Any, proposed: np.ndarray) -> np.ndarray | None:
        tick, self.tick = self.tick, self.tick + 1
        if self.episode not in self.episodes or tick >= self.ticks:
            return None
        self.taken[-1] += 1
        return np.array([expert(np.asarray(observation["observation.state"]))], np.float32)


class ScriptedPicker:
    """gym-hil's pick-cube by hand, for every tick of the episodes in `episodes`: over the
    cube with the gripper open, down to it, close, lift. gym-hil's gripper command: 0 opens,
    2 closes (the Robotiq's control rises to closed), 1 stays."""

    def __init__(self, episodes: range, ticks: int) -> None:
        self.episodes = episodes
        self.ticks = ticks
        self.episode = 0
        self.tick = 0
        self.grasp = 0
        self.taken: list[int] = []

    def reset(self) -> None:
        self.episode += 1
        self.tick = self.grasp = 0
        self.taken.append(0)

    def intervene(self, observation: Any, proposed: np.ndarray) -> np.ndarray | None:
        tick, self.tick = self.tick, self.tick + 1
        if self.episode not in self.episodes or tick >= self.ticks:
            return None
        self.taken[-1] += 1
        tcp = np.asarray(observation["observation.state"], np.float64)[15:18]
        cube = np.asarray(observation["observation.environment_state"], np.float64)
        step = (cube - tcp) / 0.025  # gym-hil's end-effector step: 2.5 cm per unit
        if self.grasp == 0:
            if np.linalg.norm(step[:2]) > 0.4:
                above = (cube[2] + 0.06 - tcp[2]) / 0.025
                return np.array([*np.clip(step[:2], -1, 1), np.clip(above, -1, 1), 0], np.float32)
            if step[2] < -0.2:
                return np.array([*np.clip(step, -1, 1), 0], np.float32)
            self.grasp = 1
        self.grasp += 1
        return np.array([0, 0, 0 if self.grasp < 6 else 1, 2], np.float32)


def expert(state: np.ndarray) -> float:
    cos, sin, speed = (float(v) for v in state)
    if cos > 0.85:
        return float(np.clip(-(12.0 * np.arctan2(sin, cos) + 2.5 * speed), -2, 2))
    energy = 0.5 * speed * speed + 15.0 * (cos - 1.0)
    return 2.0 * float(np.sign(speed or 1.0)) if energy < 0 else 0.0


def act_with_person(
    args: list[str], help_from: int, help_count: int, ticks: int, task: str
) -> None:
    """The actor's process: `rlctl rl act ARGS` with the scripted person as its intervention."""
    from dependency_injector import providers

    from rlctl.entrypoints import container as wiring
    from rlctl.entrypoints.cli.main import cli

    kind = ScriptedPicker if task == "pick-cube" else ScriptedPerson
    person = kind(range(help_from, help_from + help_count), ticks)
    build = wiring.build_container

    def with_person(*a: Any, **k: Any) -> Any:
        built = build(*a, **k)
        built.rl_acting.add_kwargs(intervention=providers.Object(lambda: person))
        return built

    wiring.build_container = with_person  # type: ignore[assignment]
    try:
        cli(["--log-format=json", "rl", "act", *args], prog_name="rlctl", standalone_mode=False)
    finally:
        print(json.dumps({"event": "person", "taken": person.taken}), flush=True)


def free_port() -> int:
    for _ in range(200):
        port = random.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit("no free port")


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise SystemExit(f"{process.args[3:5]} ended:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise SystemExit(f"no {text!r} within {timeout} s")


def events(log: Path, name: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == name:
                out.append(record)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--fps", type=float, default=100.0)
    parser.add_argument("--help-from", type=int, default=3, help="first episode the person helps")
    parser.add_argument("--help-episodes", type=int, default=5)
    parser.add_argument("--help-ticks", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads in each process")
    parser.add_argument("--task", choices=("pendulum", "pick-cube"), default="pendulum")
    parser.add_argument(
        "--learner-args",
        default="",
        help="more `rlctl rl learn` settings, after the task's (a later one wins), e.g. "
        "'--algorithm.temperature_init=1.0'",
    )
    parser.add_argument(
        "--stats",
        choices=("env", "recipe"),
        default="env",
        help="pick-cube: normalise the state with the ranges the env knows (what a user gets "
        "with no --policy.dataset_stats), or with LeRobot's recipe's recorded statistics",
    )
    parser.add_argument("--actor", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.actor is not None:
        act_with_person(args.actor, args.help_from, args.help_episodes, args.help_ticks, args.task)
        return
    print(host_line())
    if args.learner_args:
        print(f"learner settings added: {args.learner_args}")
    if args.task == "pick-cube":
        print(f"state statistics: {args.stats}")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONUNBUFFERED": "1"}
    env.setdefault("MUJOCO_GL", "egl")
    port = free_port()
    pick = args.task == "pick-cube"
    length = 100 if pick else 200
    robot = (
        [
            "--robot.env.type=hil", "--robot.env.task=PandaPickCube-v0",
            "--robot.env.obs_type=environment_state_agent_pos",
        ]
        if pick
        else ["--robot.env.type=gym", "--robot.env.id=Pendulum-v1"]
    )  # fmt: skip
    budget = args.episodes * length
    with tempfile.TemporaryDirectory(prefix="rl-learning-") as folder:
        work = Path(folder)
        learner_log, actor_log = work / "learner.log", work / "actor.log"
        cli = [sys.executable, "-c", "from rlctl.entrypoints.cli.main import main; main()"]
        started = time.perf_counter()
        learner = subprocess.Popen(
            [
                *cli, "--log-format=json", "rl", "learn", f"--output_dir={work / 'run'}",
                f"--port={port}", f"--seed={args.seed}", "--steps=100000000",
                "--policy.online_step_before_learning=400", *SMALL,
                *(PICK_RECIPE if pick else []),
                *([RECIPE_STATS] if pick and args.stats == "recipe" else []),
                *shlex.split(args.learner_args),
            ],
            stdout=learner_log.open("wb"), stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        wait_for(learner_log, "learner listening", learner, 300)
        actor = subprocess.Popen(
            [
                sys.executable, __file__, f"--help-from={args.help_from}",
                f"--help-episodes={args.help_episodes}", f"--help-ticks={args.help_ticks}",
                f"--task={args.task}", "--actor", f"--learner=127.0.0.1:{port}",
                "--robot.type=sim", *robot, f"--episodes={args.episodes}", f"--fps={args.fps}",
            ],
            stdout=actor_log.open("wb"), stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        try:
            actor.wait(timeout=budget / args.fps * 4 + 600)
        finally:
            learner.terminate()
            learner.wait(timeout=60)
        elapsed = time.perf_counter() - started
        load = os.getloadavg()
        episodes = events(actor_log, "episode")
        person = events(actor_log, "person")
        steps = events(learner_log, "learner step")
        if actor.returncode != 0 or not episodes:
            raise SystemExit(f"the actor failed:\n{actor_log.read_text()[-3000:]}")
    taken = person[0]["taken"] if person else [0] * len(episodes)
    updates = steps[-1]["step"] if steps else 0
    transitions = sum(int(r["steps"]) for r in episodes)
    print(
        f"budget: {len(episodes)} episodes of at most {length} steps at {args.fps:g} fps; "
        f"{transitions} transitions ({transitions / elapsed:.1f}/s); {updates} SAC updates "
        f"({updates / elapsed:.1f}/s); {elapsed:.0f} s; load average {load[0]:.2f} "
        f"{load[1]:.2f} {load[2]:.2f}"
    )
    if pick:
        report_successes(episodes, taken)
        return
    print("episode  return   person's ticks")
    for index, (record, ticks) in enumerate(zip(episodes, taken, strict=False), 1):
        print(f"{index:7d}  {record['reward']:8.1f}  {ticks:5d}")
    alone = [r["reward"] for r, t in zip(episodes, taken, strict=False) if t == 0]
    first, last = np.mean(alone[:2]), np.mean(alone[-5:])
    print(
        f"policy alone: first 2 episodes {first:.1f}, last 5 {last:.1f} "
        f"({'rose' if last > first + 100 else 'did not rise'}; the person alone scores about -150)"
    )


def report_successes(episodes: list[dict[str, Any]], taken: list[int]) -> None:
    # gym-hil's sparse reward is 1 on the tick the cube is lifted (which ends the episode), and
    # its info says `succeed`, not `is_success`: an episode's return tells its success.
    won = [float(r["reward"]) > 0.5 for r in episodes]
    print("episode  success  steps  person's ticks")
    for index, (record, ticks) in enumerate(zip(episodes, taken, strict=False), 1):
        print(f"{index:7d}  {won[index - 1]!s:>7}  {record['steps']:5d}  {ticks:5d}")
    alone = [w for w, t in zip(won, taken, strict=False) if t == 0]
    half = len(alone) // 2
    if not half:
        print("no episodes of the policy alone")
        return
    early, late = np.mean(alone[:half]), np.mean(alone[half:])
    helped = [w for w, t in zip(won, taken, strict=False) if t > 0]
    blocks = [alone[i : i + 10] for i in range(0, len(alone), 10)]
    print(
        "policy alone, success by blocks of 10 of its episodes: "
        + " ".join(f"{sum(b)}/{len(b)}" for b in blocks)
    )
    print(
        f"policy alone: success {early:.0%} in its first {half} episodes, {late:.0%} in its "
        f"last {len(alone) - half} ({'rose' if late > early else 'did not rise'}); the person "
        f"succeeded in {sum(helped)} of {len(helped)}"
    )


if __name__ == "__main__":
    main()
