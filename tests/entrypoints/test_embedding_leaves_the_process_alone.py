"""Embedding rlctl (`rlctl.api`) changes nothing process-wide: not on import, not while training
or recording. Only the commands that own their process (`rlctl train`, `record`, …) tune the
allocator and the interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EMBEDDED = r"""
import gc, json, sys, threading
from pathlib import Path

def process_state():
    return {
        "switch_interval": sys.getswitchinterval(),
        "frozen": gc.get_freeze_count(),
        "threads": sorted(t.name for t in threading.enumerate()),
    }

before = process_state()
import rlctl.api
after_import = process_state()

import torch
from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.memory.control import ScriptedControls
from rlctl.adapters.memory.teleoperator import ScriptedTeleoperator
from rlctl.adapters.training import allocator, backend
from rlctl.application.use_cases.record_episodes import DatasetTarget, RecordSettings
from rlctl.domain.train_settings import DatasetSource, TrainSettings
from rlctl.domain.policies import MLPConfig

mallopt_calls = []
backend.keep_freed_memory = lambda: mallopt_calls.append(1) or allocator.keep_freed_memory()
torch.set_num_threads(2)  # the dropout masks below are drawn on threads (cpu_kernels=auto)

class Sink(RecordingMetricsSink):
    threads_while_training = set()

    def write(self, step, metrics, *, phase="train"):
        self.threads_while_training.update(t.name for t in threading.enumerate())
        super().write(step, metrics, phase=phase)

class Watch(ScriptedTeleoperator):
    seen = set()

    def get_action(self, observation):
        self.seen.add((sys.getswitchinterval(), gc.get_freeze_count()))
        return super().get_action(observation)

settings = TrainSettings(
    dataset=DatasetSource(root=sys.argv[1]),
    policy=MLPConfig(chunk_size=5, n_action_steps=5, hidden_dims=(60_000,), dropout=0.1),
    output_dir=sys.argv[2], steps=2, batch_size=4, num_workers=0, log_freq=1, save_freq=0,
    eval_freq=0,
)
sink = Sink()
c = rlctl.api.container()
c.train_policy(metrics=sink)(settings)
after_training = process_state()

memory = rlctl.api.container(
    rlctl.api.AppSettings(dataset=rlctl.api.DatasetSettings(store="memory"))
)
robot = ScriptedRobot(realtime=True)
record = memory.record_episodes(robot=robot, controls=ScriptedControls(), teleop=Watch())
record(
    DatasetTarget(root=Path("/memory/embedded")),
    RecordSettings(fps=50, num_episodes=1, episode_time_s=0.1, reset_time_s=0),
)
after_recording = process_state()
print(json.dumps({
    "before": before, "after_import": after_import, "after_training": after_training,
    "after_recording": after_recording, "mallopt_calls": len(mallopt_calls),
    "allocator_tuned": allocator._done,
    "threads_while_training": sorted(Sink.threads_while_training),
    "seen_while_recording": sorted(Watch.seen),
}))
"""


@pytest.mark.slow
def test_embedded_training_and_recording_change_nothing_process_wide(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", EMBEDDED, str(fixtures_dir / "sim_video"), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    before = report["before"]
    assert report["after_import"] == before
    # The training drew its dropout masks on its own threads, and stopped them when it ended.
    assert any(name.startswith("rlctl-dropout") for name in report["threads_while_training"])
    assert report["after_training"] == before
    assert report["mallopt_calls"] == 0 and report["allocator_tuned"] is False
    # The real-time loop ran with the interpreter's own settings.
    assert report["seen_while_recording"] == [[before["switch_interval"], before["frozen"]]]
    assert report["after_recording"] == before


def test_the_commands_that_own_their_process_tune_it_and_the_facade_does_not() -> None:
    import rlctl.api
    from rlctl.entrypoints.container import build_container

    assert rlctl.api.container().owns_process() is False
    assert rlctl.api.container().training_backend().keep_freed_memory is False
    owned = build_container(owns_process=True)
    assert owned.owns_process() is True
    assert owned.training_backend().keep_freed_memory is True
