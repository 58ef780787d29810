"""`rlctl rl learn` and `rlctl rl act` end to end, as two processes on localhost, on gymnasium's
Pendulum through the simulated robot (every action through its safety guard): the actor started
before its learner holds and connects when it comes up, transitions stream, parameters come back,
the learner checkpoints (a LeRobot `pretrained_model/` any tool loads), and a restarted learner
resumes from its last checkpoint and replay. Bounded: every process has a timeout."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")

CLI = ["-c", "from rlctl.entrypoints.cli.main import main; main()"]
TINY = [
    "--policy.latent_dim=8",
    "--policy.actor_network_kwargs.hidden_dims=[16]",
    "--policy.online_step_before_learning=50",
    "--algorithm.critic_network_kwargs.hidden_dims=[16]",
    "--batch_size=16",
    "--save_freq=10",
    "--push_every_s=0.2",
    "--max_seconds=240",
]
PENDULUM = ["--robot.type=sim", "--robot.env.type=gym", "--robot.env.id=Pendulum-v1"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(log: Path, *args: str) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(
        [sys.executable, *CLI, "rl", *args], stdout=out, stderr=subprocess.STDOUT
    )


def finish(process: subprocess.Popen[bytes], log: Path, timeout: float) -> str:
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        raise AssertionError(f"timed out:\n{log.read_text()[-3000:]}") from None
    text = log.read_text()
    assert process.returncode == 0, text[-3000:]
    return text


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_learner_and_actor_train_resume_and_reconnect(tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "run"
    actor_log, learner_log = tmp_path / "actor.log", tmp_path / "learner.log"
    # The actor first: no learner yet, it holds and keeps trying.
    actor = start(actor_log, "act", f"--learner=127.0.0.1:{port}", *PENDULUM, "--steps=400")
    time.sleep(2)
    learner = start(
        learner_log, "learn", f"--output_dir={out}", f"--port={port}", "--steps=20", *TINY
    )
    acted = finish(actor, actor_log, 400)
    learned = finish(learner, learner_log, 400)
    assert "holding the arm and reconnecting" in acted
    assert "acted: 400 steps, 2 episodes" in acted
    assert "learned: 20 steps, 400 online transitions, 2 episodes" in learned
    last = out / "checkpoints" / "last"
    assert last.resolve().name == "000000020"
    config = json.loads((last / "pretrained_model" / "config.json").read_text())
    assert config["type"] == "gaussian_actor" and "n_action_steps" not in config
    assert (last / "algorithm" / "model.safetensors").is_file()
    step = json.loads((last / "training_state" / "training_step.json").read_text())
    assert step == {"step": 20, "interaction_step": 400}

    # A restarted learner resumes from its checkpoint and replay, and trains on.
    learner = start(
        learner_log, "learn", f"--output_dir={out}", f"--port={port}", "--resume=true",
        "--steps=30", *TINY,
    )  # fmt: skip
    resumed = finish(learner, learner_log, 400)
    assert "learned: 30 steps, 400 online transitions" in resumed
    assert last.resolve().name == "000000030"
