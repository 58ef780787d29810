"""TrainPolicy against the scripted backend: cadences, resume arithmetic, Ctrl-C, evaluation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.memory.training import ScriptedTrainingBackend, scripted_loss
from rlctl.application.use_cases.train_policy import TrainPolicy
from rlctl.domain.errors import ConfigError
from rlctl.domain.eval_metrics import EpisodeResult, EvalReport, TaskResult
from rlctl.domain.eval_settings import EvalSettings
from rlctl.domain.policies import MLPConfig
from rlctl.domain.train_settings import TrainSettings

OUT = "runs/a"


def train_settings(**overrides) -> TrainSettings:
    fields = dict(
        policy=MLPConfig(), output_dir=OUT, steps=10, log_freq=0, save_freq=0, eval_freq=0,
        batch_size=4,
    )  # fmt: skip
    return TrainSettings(**{**fields, **overrides})


class Evaluations:
    def __init__(self) -> None:
        self.calls: list[tuple[object, EvalSettings]] = []

    def __call__(self, policy, eval_settings: EvalSettings) -> EvalReport:
        self.calls.append((policy, eval_settings))
        episode = EpisodeResult(0, 0, 1.0, 1.0, True, 3)
        return EvalReport([TaskResult("suite", 0, [episode])], eval_s=0.5)


def run(backend, settings_, evaluator=None):
    sink, progress = RecordingMetricsSink(), RecordingProgress()
    report = TrainPolicy(backend, progress, sink, evaluator)(settings_)
    return report, sink, progress


def expected_saves(first: int, last: int, save_freq: int, total: int) -> list[int]:
    return [s for s in range(first, last + 1) if (save_freq and s % save_freq == 0) or s == total]


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(1, 40),
    save_freq=st.integers(0, 15),
    log_freq=st.integers(0, 15),
    save_checkpoint=st.booleans(),
)
def test_checkpoint_and_log_cadence(steps, save_freq, log_freq, save_checkpoint):
    backend = ScriptedTrainingBackend()
    cfg = train_settings(
        steps=steps, save_freq=save_freq, log_freq=log_freq, save_checkpoint=save_checkpoint
    )
    report, sink, progress = run(backend, cfg)

    assert backend.record.steps == list(range(1, steps + 1))
    assert backend.record.saves == (
        expected_saves(1, steps, save_freq, steps) if save_checkpoint else []
    )
    logged = [s for s in range(1, steps + 1) if log_freq and s % log_freq == 0]
    if not logged or logged[-1] != steps:
        logged.append(steps)  # what the last window saw is always written
    assert sink.steps("train") == logged
    assert report.steps_done == steps and not report.interrupted
    assert report.metrics["loss"] == pytest.approx(
        sum(map(scripted_loss, range(logged[-2] + 1 if len(logged) > 1 else 1, steps + 1)))
        / (steps - (logged[-2] if len(logged) > 1 else 0))
    )
    assert progress.tasks[0].total == steps and progress.tasks[0].done == steps
    assert progress.tasks[0].closed and sink.closed and backend.record.closed == 1


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(2, 40),
    save_freq=st.integers(0, 12),
    data=st.data(),
)
def test_ctrl_c_saves_and_resume_continues_at_the_saved_step(steps, save_freq, data):
    interrupt_at = data.draw(st.integers(1, steps), label="interrupt_at")
    backend = ScriptedTrainingBackend(interrupt_at=interrupt_at)
    first, _, _ = run(backend, train_settings(steps=steps, save_freq=save_freq))

    done = interrupt_at - 1
    assert first.interrupted and first.steps_done == done
    periodic = expected_saves(1, done, save_freq, steps)
    # Ctrl-C saves what was completed since the last periodic checkpoint.
    assert backend.record.saves == periodic + ([done] if done and done not in periodic else [])
    assert first.last_checkpoint is None if done == 0 else first.last_checkpoint.step == done

    if done == 0:
        with pytest.raises(ConfigError, match="no checkpoint"):
            run(backend, train_settings(steps=steps, resume=OUT))
        return
    backend.record.steps.clear()
    second, _, progress = run(backend, train_settings(steps=steps, save_freq=save_freq, resume=OUT))
    assert backend.record.starts[-1] == done
    assert second.start_step == done and second.steps_done == steps
    assert backend.record.steps == list(range(done + 1, steps + 1))
    assert progress.tasks[0].total == steps - done


@settings(max_examples=40, deadline=None)
@given(steps=st.integers(1, 30), eval_freq=st.integers(0, 10), save_freq=st.integers(0, 10))
def test_evaluation_cadence(steps, eval_freq, save_freq):
    backend, evaluations = ScriptedTrainingBackend(), Evaluations()
    cfg = train_settings(
        steps=steps, eval_freq=eval_freq, save_freq=save_freq,
        eval=EvalSettings(n_episodes=1, max_episodes_rendered=1),
    )  # fmt: skip
    report, sink, _ = run(backend, cfg, evaluations)

    due = [s for s in range(1, steps + 1) if eval_freq and s % eval_freq == 0]
    assert backend.record.evaluations == due
    assert [step for step, _ in report.evaluations] == due
    assert sink.steps("eval") == due
    assert all(r.metrics["pc_success"] == 100.0 for r in sink.records if r.phase == "eval")
    assert [s.videos_dir for _, s in evaluations.calls] == [
        f"{OUT}/eval/videos_step_{s}" for s in due
    ]


def test_without_an_evaluator_nothing_is_evaluated():
    backend = ScriptedTrainingBackend()
    run(backend, train_settings(steps=6, eval_freq=2))
    assert backend.record.evaluations == []


def test_a_new_run_refuses_an_output_dir_with_checkpoints():
    backend = ScriptedTrainingBackend()
    run(backend, train_settings(steps=3, save_freq=1))
    with pytest.raises(ConfigError, match="already holds a training run") as err:
        run(backend, train_settings(steps=6))
    assert "--resume" in (err.value.hint or "")


def test_a_finished_run_resumes_to_nothing():
    backend = ScriptedTrainingBackend()
    run(backend, train_settings(steps=4, save_freq=2))
    report, _, _ = run(backend, train_settings(steps=4, resume=OUT))
    assert report.steps_done == 4 and report.start_step == 4
    assert backend.record.starts == [None]  # nothing was built the second time


def test_resuming_raises_the_step_budget():
    backend = ScriptedTrainingBackend()
    run(backend, train_settings(steps=4, save_freq=0))
    report, _, _ = run(backend, train_settings(steps=7, resume=OUT))
    assert (report.start_step, report.steps_done) == (4, 7)
    assert backend.record.saves == [4, 7]


def test_a_checkpoint_folder_can_be_resumed_directly():
    backend = ScriptedTrainingBackend()
    run(backend, train_settings(steps=6, save_freq=2))
    report, _, _ = run(backend, train_settings(steps=6, resume=f"{OUT}/checkpoints/000002"))
    assert report.start_step == 2
    assert backend.record.steps[-4:] == [3, 4, 5, 6]


def test_no_output_dir_is_refused():
    with pytest.raises(ConfigError, match="output dir"):
        run(ScriptedTrainingBackend(), train_settings(output_dir=None))
