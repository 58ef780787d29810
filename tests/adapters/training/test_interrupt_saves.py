"""`rlctl train` in a real process, stopped as people and supervisors stop it: Ctrl-C under
`uv run` (the terminal's SIGINT and uv's copy of it), SIGTERM, Ctrl-C again while the checkpoint
is written. The checkpoint of the steps done is complete and resumable; only a user who insists
abandons it, and then the previous one is intact.

The save is slowed from the outside: the child process runs the CLI with `save_optimizer`
wrapped to sleep while a `slow` file exists in the run folder, and to leave a `saving-<n>` mark
(and `held-<n>` once it waits).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.adapters.training.checkpoints import find_checkpoint
from tests.adapters.training.points import points_dataset

CHILD = """
import sys, time
from pathlib import Path
from rlctl.adapters.training import state_files
out = Path(sys.argv[1]); del sys.argv[1]
plain = state_files.save_optimizer
calls = []
def save_optimizer(optimizer, folder):
    calls.append(1)
    (out / f"saving-{len(calls)}").touch()
    while (out / "slow").exists():
        (out / f"held-{len(calls)}").touch()
        time.sleep(0.05)
    plain(optimizer, folder)
state_files.save_optimizer = save_optimizer
from rlctl.entrypoints.cli.main import main
main()
"""
DEADLINE_S = 240


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return points_dataset(tmp_path_factory.mktemp("points") / "ds", episodes=2, length=10)


def environment() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "RLCTL_PROGRESS": "silent"}


class Run:
    def __init__(self, dataset: Path, out: Path, *extra: str) -> None:
        out.mkdir(parents=True)
        self.out = out
        self.stderr_path = out.parent / f"{out.name}.stderr"
        args = [
            "train", f"--dataset.root={dataset}", "--policy.type=mlp", "--policy.chunk_size=2",
            "--policy.n_action_steps=2", "--policy.hidden_dims=[16,16]", "--steps=1000000",
            "--batch_size=4", "--num_workers=0", "--log_freq=1", f"--output_dir={out}", *extra,
        ]  # fmt: skip
        with self.stderr_path.open("wb") as err:
            # Its own session, as a terminal's foreground job: `killpg` is the terminal's Ctrl-C.
            self.process = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(out), *args],
                env=environment(), stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip

    def wait_for(self, condition, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            assert self.process.poll() is None, f"ended before {what}: {self.stderr()}"
            assert time.monotonic() < deadline, f"no {what} in {DEADLINE_S} s"
            time.sleep(0.02)

    def steps_logged(self) -> int:
        path = self.out / "metrics.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return max((json.loads(line)["step"] for line in lines[:-1]), default=0)

    def saving(self, n: int) -> bool:
        return (self.out / f"saving-{n}").exists()

    def ctrl_c_under_uv(self) -> None:
        os.killpg(self.process.pid, signal.SIGINT)  # the terminal, to the foreground group
        self.process.send_signal(signal.SIGINT)  # uv, forwarding it to its child

    def finish(self) -> int:
        try:
            return self.process.wait(timeout=DEADLINE_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def complete(out: Path, step: int) -> None:
    """`last` is the checkpoint of `step`, whole: its policy loads."""
    found = find_checkpoint(out)
    assert found is not None and found.step == step
    assert int(Path(found.location).name) == step
    load_policy_folder(out / "checkpoints" / "last" / "pretrained_model")
    assert not list((out / "checkpoints").glob(".*partial*"))


@pytest.mark.slow
def test_ctrl_c_under_uv_saves_the_checkpoint_and_the_run_resumes(dataset, tmp_path):
    run = Run(dataset, tmp_path / "run", "--save_freq=0")
    try:
        run.wait_for(lambda: run.steps_logged() >= 3, "a training step")
        run.ctrl_c_under_uv()
        code = run.finish()
    finally:
        run.finish()
    assert code == 130, run.stderr()
    stderr = run.stderr()
    assert "interrupted; continue with: rlctl train --resume=" in stderr
    lines = (run.out / "metrics.jsonl").read_text().splitlines()
    logged = max(json.loads(line)["step"] for line in lines)
    found = find_checkpoint(run.out)
    assert found is not None
    # The interrupt may come after an update and before its metrics line: that step is kept.
    done = found.step
    assert done in (logged, logged + 1)
    complete(run.out, done)

    resumed = subprocess.run(
        [sys.executable, "-c", CHILD, str(run.out), "train", f"--resume={run.out}",
         f"--steps={done + 2}"],
        env=environment(), capture_output=True, text=True, timeout=DEADLINE_S, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert f"trained steps {done}..{done + 2}" in resumed.stdout


@pytest.mark.slow
def test_sigterm_then_ctrl_c_while_saving_still_completes_the_checkpoint(dataset, tmp_path):
    run = Run(dataset, tmp_path / "run", "--save_freq=0")
    try:
        run.wait_for(lambda: run.steps_logged() >= 2, "a training step")
        (run.out / "slow").touch()
        run.process.send_signal(signal.SIGTERM)
        run.wait_for(lambda: run.saving(1), "the save")
        time.sleep(0.5)
        run.ctrl_c_under_uv()  # while the checkpoint is being written
        time.sleep(0.5)
        (run.out / "slow").unlink()
        code = run.finish()
    finally:
        run.finish()
    assert code == 130, run.stderr()
    assert "saving the checkpoint, please wait" in run.stderr()
    found = find_checkpoint(run.out)
    assert found is not None
    complete(run.out, found.step)


@pytest.mark.slow
def test_insisting_on_ctrl_c_abandons_the_save_and_keeps_the_previous_checkpoint(dataset, tmp_path):
    run = Run(dataset, tmp_path / "run", "--save_freq=2")
    try:
        run.wait_for(lambda: run.saving(2), "a first checkpoint")
        (run.out / "slow").touch()
        # Whichever save meets the `slow` file is held: the one under way, or the next.
        run.wait_for(lambda: any(run.out.glob("held-*")), "a save held up")
        previous = find_checkpoint(run.out)  # saves run one after the other
        run.ctrl_c_under_uv()  # the stop waits for the save...
        for _ in range(3):  # ... unless the user insists
            time.sleep(0.4)
            run.ctrl_c_under_uv()
        code = run.finish()
    finally:
        (run.out / "slow").unlink(missing_ok=True)
        run.finish()
    assert code == 130, run.stderr()
    stderr = run.stderr()
    assert "saving the checkpoint, please wait (press Ctrl-C 3 more times" in stderr
    assert "abandoning the checkpoint: the previous checkpoint is kept" in stderr
    assert "continue with: rlctl train --resume=" in stderr
    assert previous is not None
    complete(run.out, previous.step)
