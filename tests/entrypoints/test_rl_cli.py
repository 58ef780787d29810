"""`rlctl rl learn` and `rlctl rl act` end to end, as two processes on localhost, on gymnasium's
Pendulum through the simulated robot (every action through its safety guard): the actor started
before its learner holds and connects when it comes up, transitions stream, parameters come back,
the learner checkpoints (a LeRobot `pretrained_model/` any tool loads), and a restarted learner
resumes from its last checkpoint and replay. Bounded: every process has a timeout."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

pytest.importorskip("gymnasium")

CLI = ["-c", "from rlctl.entrypoints.cli.main import main; main()"]
TINY = [
    "--policy.latent_dim=8",
    "--policy.actor_network_kwargs.hidden_dims=[16]",
    "--algorithm.critic_network_kwargs.hidden_dims=[16]",
    "--batch_size=16",
    "--save_freq=10",
    "--push_every_s=0.2",
    "--max_seconds=420",
]
PENDULUM = ["--robot.type=sim", "--robot.env.type=gym", "--robot.env.id=Pendulum-v1"]
# Generous for a loaded machine (two processes importing torch on shared cores); every wait is
# bounded by one of these.
START_S = 240.0
RUN_S = 480.0
HOLDING = "holding the arm and reconnecting"
LISTENING = "learner listening on"


def free_port() -> int:
    """A free port below the ephemeral range (32768+ here), where no outgoing connection of
    another process is given it while the test is not listening on it yet."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 20000-32000")


def start(log: Path, *args: str) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(
        [sys.executable, *CLI, "rl", *args], stdout=out, stderr=subprocess.STDOUT
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


def wait_for(process: subprocess.Popen[bytes], log: Path, text: str, timeout: float) -> bool:
    """Until `text` is in the log (True), or the process ends first (False); fails past
    `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return True
        if process.poll() is not None:
            return text in log.read_text(errors="replace")
        time.sleep(0.2)
    stop(process)
    raise AssertionError(f"no {text!r} within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def finish(process: subprocess.Popen[bytes], log: Path, timeout: float) -> str:
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(process)
        raise AssertionError(f"timed out:\n{log.read_text()[-3000:]}") from None
    text = log.read_text()
    assert process.returncode == 0, text[-3000:]
    return text


def actor_then_learner(
    tmp_path: Path, actor_args: list[str], learner_args: list[str]
) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], int]:
    """An actor started before its learner (it holds and keeps trying), then the learner once the
    actor is seen holding; a port another process took meanwhile is replaced (three tries)."""
    actor_log, learner_log = tmp_path / "actor.log", tmp_path / "learner.log"
    for _ in range(3):
        port = free_port()
        actor = start(actor_log, "act", f"--learner=127.0.0.1:{port}", *actor_args)
        if not wait_for(actor, actor_log, HOLDING, START_S):
            raise AssertionError(f"the actor ended before holding:\n{actor_log.read_text()}")
        learner = start(learner_log, "learn", f"--port={port}", *learner_args)
        if wait_for(learner, learner_log, LISTENING, START_S):
            return actor, learner, port
        stop(actor)
        if "cannot listen" not in learner_log.read_text():
            raise AssertionError(f"the learner did not start:\n{learner_log.read_text()}")
    raise AssertionError("three ports in a row were taken")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_learner_and_actor_train_resume_and_reconnect(tmp_path: Path) -> None:
    out = tmp_path / "run"
    actor_log, learner_log = tmp_path / "actor.log", tmp_path / "learner.log"
    # Learning waits for all 400 transitions, so the learner cannot finish before the second
    # episode arrives however the two processes are scheduled.
    actor, learner, port = actor_then_learner(
        tmp_path,
        [*PENDULUM, "--steps=400"],
        [f"--output_dir={out}", "--steps=20", "--policy.online_step_before_learning=400", *TINY],
    )
    acted = finish(actor, actor_log, RUN_S)
    learned = finish(learner, learner_log, RUN_S)
    assert "acted: 400 steps, 2 episodes" in acted
    assert "learned: 20 steps, 400 online transitions, 2 episodes" in learned
    last = out / "checkpoints" / "last"
    assert last.resolve().name == "000020"
    config = json.loads((last / "pretrained_model" / "config.json").read_text())
    assert config["type"] == "gaussian_actor" and "n_action_steps" not in config
    assert (last / "algorithm" / "model.safetensors").is_file()
    step = json.loads((last / "training_state" / "training_step.json").read_text())
    assert step == {"step": 20, "interaction_step": 400}

    # A restarted learner resumes from its checkpoint and replay, and trains on.
    learner = start(
        learner_log, "learn", f"--output_dir={out}", f"--port={port}", "--resume=true",
        "--steps=30", "--policy.online_step_before_learning=400", *TINY,
    )  # fmt: skip
    resumed = finish(learner, learner_log, RUN_S)
    assert "learned: 30 steps, 400 online transitions" in resumed
    assert last.resolve().name == "000030"


def write_demonstrations(root: Path, episodes: int = 3, length: int = 30) -> int:
    """Pendulum demonstrations as a LeRobot v3.0 dataset with rewards: an energy-pumping swing
    (the kind of data a person gives), each step's reward Pendulum's own."""
    import gymnasium as gym

    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
    from rlctl.domain.features import FeatureSpec

    features = {
        "observation.state": FeatureSpec("observation.state", "float32", (3,)),
        "action": FeatureSpec("action", "float32", (1,)),
        "next.reward": FeatureSpec("next.reward", "float32", (1,)),
        "next.done": FeatureSpec("next.done", "bool", (1,)),
    }
    env = gym.make("Pendulum-v1")
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    frames = 0
    with LeRobotV3Writer(options=options).create(root, fps=20, features=features) as session:
        for episode in range(episodes):
            state, _ = env.reset(seed=episode)
            for t in range(length):
                cos, _, speed = state
                action = np.clip([2.0 * np.sign(speed or 1.0) * (cos < 0.9)], -2, 2)
                following, reward, _, _, _ = env.step(action.astype(np.float32))
                session.add_frame(
                    {
                        "observation.state": np.asarray(state, dtype=np.float32),
                        "action": action.astype(np.float32),
                        "next.reward": np.float32(reward),
                        "next.done": np.asarray([t == length - 1]),
                        "task": "swing up",
                    }
                )
                state = following
                frames += 1
            session.save_episode()
    env.close()
    return frames


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_learner_mixes_a_lerobot_dataset_of_demonstrations(tmp_path: Path) -> None:
    demos = tmp_path / "demos"
    frames = write_demonstrations(demos)
    out = tmp_path / "run"
    actor_log, learner_log = tmp_path / "actor.log", tmp_path / "learner.log"
    actor, learner, _ = actor_then_learner(
        tmp_path,
        [*PENDULUM, "--steps=200"],
        [
            f"--output_dir={out}", f"--demonstrations={demos}", "--steps=10",
            "--policy.online_step_before_learning=200", "--online_ratio=0.5", *TINY,
        ],
    )  # fmt: skip
    finish(actor, actor_log, RUN_S)
    learned = finish(learner, learner_log, RUN_S)
    assert (
        f"learned: 10 steps, 200 online transitions, 1 episodes, {frames} offline transitions"
        in learned
    )
    # The policy was built from the dataset's features and statistics (its normaliser holds the
    # demonstrations' state mean), and the offline replay went into the checkpoint.
    last = out / "checkpoints" / "last"
    model = last / "pretrained_model"
    config = json.loads((model / "config.json").read_text())
    assert config["input_features"]["observation.state"]["shape"] == [3]
    (normalizer,) = model.glob("policy_preprocessor_step_*normalizer*.safetensors")
    mean = load_file(str(normalizer))["observation.state.mean"]
    stats = json.loads((demos / "meta" / "stats.json").read_text())
    np.testing.assert_allclose(mean, stats["observation.state"]["mean"], rtol=1e-5)
    saved = json.loads((last / "replay_offline" / "replay.json").read_text())
    assert saved["size"] == frames


def test_the_actors_longest_busy_wait_is_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--max_backoff_s` reaches the actor's settings (what the actor does with it, and its
    refusal of a bad one, are `tests/application/test_reinforcement.py`'s)."""
    from click.testing import CliRunner

    from rlctl.application.use_cases.rl_act import ActResult, ActSettings
    from rlctl.entrypoints import container
    from rlctl.entrypoints.cli.main import cli

    given: list[ActSettings] = []

    class Acting:
        def __call__(self, settings: ActSettings, **_: object) -> ActResult:
            given.append(settings)
            return ActResult(1, 1, (0.0,), (False,), 0, 1, 0)

    class Container:
        def robot(self, config: object) -> object:
            return config

        def rl_acting(self, config: object, robot: object) -> Acting:
            return Acting()

    monkeypatch.setattr(container, "build_container", lambda *a, **k: Container())
    args = ["rl", "act", "--robot.type=scripted", "--episodes=1", "--max_backoff_s=2.5"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert [s.max_backoff_s for s in given] == [2.5]
    result = CliRunner().invoke(cli, ["rl", "act", "--help"])
    assert "--max_backoff_s" in result.output and "doubles" in result.output


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e12"])
def test_a_learners_message_timeout_that_is_not_a_positive_finite_time_is_refused(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from rlctl.entrypoints import container
    from rlctl.entrypoints.cli.main import cli

    def never(*_: object, **__: object) -> None:
        raise AssertionError("nothing is built for a refused setting")

    monkeypatch.setattr(container, "build_container", never)
    result = CliRunner().invoke(cli, ["rl", "learn", f"--message_timeout_s={value}"])
    assert result.exit_code == 1, result.output
    assert "--message_timeout_s: message_timeout_s must be a positive, finite number" in (
        result.output
    )
    assert "hint: e.g. --message_timeout_s=30" in result.output


@pytest.mark.parametrize(("args", "expected"), [([], 30.0), (["--message_timeout_s=2.5"], 2.5)])
def test_the_learners_message_timeout_reaches_its_server(
    args: list[str], expected: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The option, through the real container, is what the learner's gRPC server is built
    with (a stand-in server records it and stops the command there)."""
    from click.testing import CliRunner

    from rlctl.adapters.remote import grpc_server
    from rlctl.domain.errors import ConfigError
    from rlctl.entrypoints.cli.main import cli

    given: list[dict[str, object]] = []

    def server(**kwargs: object) -> None:
        given.append(kwargs)
        raise ConfigError("stopped after the server's settings", where="test")

    monkeypatch.setattr(grpc_server, "GrpcPolicyServer", server)
    result = CliRunner().invoke(cli, ["rl", "learn", "--port=0", *args])
    assert result.exit_code == 1 and "stopped after the server's settings" in result.output
    assert [g["message_timeout_s"] for g in given] == [expected]
    help_text = CliRunner().invoke(cli, ["rl", "learn", "--help"]).output
    assert "--message_timeout_s" in help_text and "float = 30.0" in help_text


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_learner_cuts_off_a_stalled_call_after_its_message_timeout(tmp_path: Path) -> None:
    """`rlctl rl learn --message_timeout_s=0.5`: a push that sends its headers and never its
    message (an actor frozen mid-send) is cancelled by the learner well before the default 30 s."""
    import threading

    import grpc

    from rlctl.adapters.remote.rl_grpc import SERVICE

    log = tmp_path / "learner.log"
    for _ in range(3):
        port = free_port()
        learner = start(
            log, "learn", f"--port={port}", f"--output_dir={tmp_path / 'run'}",
            "--message_timeout_s=0.5", *TINY,
        )  # fmt: skip
        if wait_for(learner, log, LISTENING, START_S):
            break
        if "cannot listen" not in log.read_text():
            raise AssertionError(f"the learner did not start:\n{log.read_text()}")
    else:
        raise AssertionError("three ports in a row were taken")
    never = threading.Event()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:

        def no_message():
            never.wait(60)
            yield b""

        push = channel.stream_unary(f"/{SERVICE}/PushTransitions")
        began = time.monotonic()
        call = push.future(no_message(), timeout=60)
        error = call.exception(timeout=60)
        waited = time.monotonic() - began
        assert error is not None and error.code() is grpc.StatusCode.CANCELLED, error
        assert waited < 15, waited  # cut off by the learner at 0.5 s (its default: 30 s)
        assert learner.poll() is None  # and it goes on serving
    finally:
        never.set()
        channel.close()
        stop(learner)


HIL_STATE_ONLY = [
    "--robot.type=sim",
    "--robot.env.type=hil",
    "--robot.env.obs_type=environment_state_agent_pos",
    "--robot.env.episode_length=10",
    "--robot.env.reward_type=dense",
    "--robot.env.random_block_position=true",
]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_state_only_gym_hil_run_is_normalised_with_the_arms_ranges_and_gym_hils_options(
    tmp_path: Path,
) -> None:
    """No --policy.dataset_stats: the learner normalises the arm's state and the cube's position
    with the ranges the env knows (its model's), and gym-hil's dense reward and random cube
    reach the env (the replay's rewards are shaped, its cube moves between episodes)."""
    pytest.importorskip("gym_hil")
    out = tmp_path / "run"
    actor_log, learner_log = tmp_path / "actor.log", tmp_path / "learner.log"
    actor, learner, _ = actor_then_learner(
        tmp_path,
        [*HIL_STATE_ONLY, "--steps=30"],
        [f"--output_dir={out}", "--steps=5", "--policy.online_step_before_learning=30", *TINY],
    )
    finish(actor, actor_log, RUN_S)
    learned = finish(learner, learner_log, RUN_S)
    assert "learned: 5 steps, 30 online transitions" in learned
    assert "no statistics fit this feature" not in learned

    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot
    from rlctl.adapters.sim.registry import make_env_config

    env = make_env_config("hil", obs_type="environment_state_agent_pos")
    ranges = SimRobot(SimRobotConfig(env=env)).observation_bounds
    last = out / "checkpoints" / "last"
    (normalizer,) = (last / "pretrained_model").glob(
        "policy_preprocessor_step_*normalizer*.safetensors"
    )
    stats = load_file(str(normalizer))
    for key in ("observation.state", "observation.environment_state"):
        low, high = ranges[key]
        np.testing.assert_allclose(stats[f"{key}.min"], low, rtol=1e-6)
        np.testing.assert_allclose(stats[f"{key}.max"], high, rtol=1e-6)
    assert stats["observation.state.max"][14] == 255.0  # the gripper's command, 0-255

    replay = load_file(str(last / "replay" / "transitions.safetensors"))
    rewards = replay["reward"].reshape(-1)
    # Dense: the hand's closeness to the cube, every step (sparse would be all zeros here).
    assert ((rewards > 0.0) & (rewards < 1.0)).all(), rewards
    cubes = {k: v for k, v in replay.items() if "environment_state" in k and "next" not in k}
    (cube,) = cubes.values()
    starts = np.round(cube.reshape(30, 3)[::10, :2], 3)
    assert len({tuple(xy) for xy in starts}) == 3, starts


@pytest.mark.parametrize(
    ("arg", "where"),
    [
        ("--fps=nan", "--fps"),
        ("--fps=0", "--fps"),
        ("--steps=0", "--steps"),
        ("--push_every=-1", "--push_every"),
        ("--max_message_mb=4096", "--max_message_mb"),
    ],
)
def test_an_actors_wrong_values_are_refused_before_the_robot_is_built(
    arg: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from rlctl.entrypoints import container
    from rlctl.entrypoints.cli.main import cli

    def never(*_: object, **__: object) -> None:
        raise AssertionError("nothing is built for a refused setting")

    monkeypatch.setattr(container, "build_container", never)
    args = ["rl", "act", "--episodes=1", arg]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert f"{where}:" in result.output
