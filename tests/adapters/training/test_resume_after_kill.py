"""A real run killed with SIGKILL after a checkpoint resumes at the saved step, and the losses
that follow are exactly those of a run that was never interrupted (same data, same RNG)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlctl.adapters.training.checkpoints import find_checkpoint

CLI = [sys.executable, "-c", "from rlctl.entrypoints.cli.main import main; main()"]
MORE_STEPS = 5


def command(sim_video: Path, out: Path, steps: int) -> list[str]:
    return [
        *CLI, "--log-format=json", "train", f"--dataset.root={sim_video}", "--policy.type=mlp",
        "--policy.chunk_size=5", "--policy.n_action_steps=5", "--policy.dropout=0.2",
        "--policy.hidden_dims=[128,128]", f"--steps={steps}", "--batch_size=8",
        "--num_workers=1", "--log_freq=1", "--save_freq=4", f"--output_dir={out}",
    ]  # fmt: skip


def environment() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "RLCTL_PROGRESS": "silent"}


def losses(out: Path, skip: int = 0) -> dict[int, float]:
    lines = (out / "metrics.jsonl").read_text().splitlines()[skip:]
    records = [json.loads(line) for line in lines if line.strip()]
    return {r["step"]: r["loss"] for r in records if r["phase"] == "train"}


@pytest.mark.slow
def test_resume_after_sigkill_replays_the_same_stream(fixtures_dir, tmp_path):
    sim_video = fixtures_dir / "sim_video"
    killed = tmp_path / "killed"
    process = subprocess.Popen(
        command(sim_video, killed, 100_000),
        env=environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (killed / "checkpoints" / "last").exists():
            assert process.poll() is None, "the training run ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint within two minutes"
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    saved = find_checkpoint(killed)
    assert saved is not None and saved.step % 4 == 0
    target = saved.step + MORE_STEPS
    written = len((killed / "metrics.jsonl").read_text().splitlines())

    resumed = subprocess.run(
        [*CLI, "train", f"--resume={killed}", f"--steps={target}"],
        env=environment(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    after = losses(killed, skip=written)
    assert sorted(after) == list(range(saved.step + 1, target + 1))

    reference = tmp_path / "uninterrupted"
    plain = subprocess.run(
        command(sim_video, reference, target),
        env=environment(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    expected = losses(reference)
    assert after == {step: expected[step] for step in after}
