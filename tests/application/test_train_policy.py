"""TrainPolicy against the scripted backend: cadences, resume arithmetic, Ctrl-C, evaluation."""

from __future__ import annotations

import pytest
from dependency_injector import providers
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.memory.training import ScriptedTrainingBackend, scripted_loss
from rlctl.application.ports.training import NonFinite, TrainingDiverged
from rlctl.application.use_cases.train_policy import MAX_SKIPPED_IN_A_ROW, TrainPolicy
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import ConfigError
from rlctl.domain.eval_metrics import EpisodeResult, EvalReport, TaskResult
from rlctl.domain.eval_settings import EvalSettings
from rlctl.domain.features import features_from_info
from rlctl.domain.policies import MLPConfig
from rlctl.domain.train_settings import DatasetSource, TrainSettings
from rlctl.entrypoints.container import build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

OUT = "runs/a"
# Datasets of the in-memory store (locations, not Hub repo ids).
DATASETS = ("points", "data/points")
META = DatasetMeta(
    codebase_version="v3.0",
    fps=10,
    features=features_from_info(
        {
            "observation.state": {"dtype": "float32", "shape": [2], "names": None},
            "action": {"dtype": "float32", "shape": [2], "names": None},
        }
    ),
    total_episodes=0,
    total_frames=0,
    tasks=(),
    episodes=(),
)


def train_settings(**overrides) -> TrainSettings:
    fields = dict(
        dataset=DatasetSource(root="points"), policy=MLPConfig(), output_dir=OUT, steps=10,
        log_freq=0, save_freq=0, eval_freq=0, batch_size=4,
    )  # fmt: skip
    return TrainSettings(**{**fields, **overrides})


def train_policy(backend, progress, sink, evaluator=None) -> TrainPolicy:
    """TrainPolicy as the container composes it, over the scripted backend and a dataset in RAM."""
    container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
    store = container.meta_reader()
    for location in DATASETS:
        store.add(location, META)
    assert isinstance(store, InMemoryDatasetStore)
    container.training_backend.override(providers.Object(backend))
    container.progress.override(providers.Object(progress))
    return container.train_policy(metrics=sink, evaluator=evaluator)


class Evaluations:
    def __init__(self) -> None:
        self.calls: list[tuple[object, EvalSettings]] = []

    def __call__(self, policy, eval_settings: EvalSettings) -> EvalReport:
        self.calls.append((policy, eval_settings))
        episode = EpisodeResult(0, 0, 1.0, 1.0, True, 3)
        return EvalReport([TaskResult("suite", 0, [episode])], eval_s=0.5)


def run(backend, settings_, evaluator=None):
    sink, progress = RecordingMetricsSink(), RecordingProgress()
    report = train_policy(backend, progress, sink, evaluator)(settings_)
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


# --- non-finite steps -----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(steps=st.integers(2, 30), save_freq=st.integers(0, 8), data=st.data())
def test_a_nonfinite_step_stops_the_run_there_and_keeps_the_last_good_checkpoint(
    steps, save_freq, data
):
    bad = data.draw(st.integers(1, steps), label="nonfinite_at")
    backend = ScriptedTrainingBackend(nonfinite_at=bad, nonfinite=NonFinite(data=("action",)))
    with pytest.raises(TrainingDiverged, match=f"stopped at step {bad}:") as err:
        run(backend, train_settings(steps=steps, save_freq=save_freq, log_freq=1))

    assert backend.record.steps == list(range(1, bad))
    # Nothing is saved at or after the bad step; the periodic checkpoints before it stay.
    assert backend.record.saves == expected_saves(1, bad - 1, save_freq, steps)
    assert backend.record.closed == 1
    saved = backend.find_checkpoint(OUT)
    if saved is None:
        assert "no checkpoint was saved" in (err.value.hint or "")
    else:
        assert f"(step {saved.step}) is kept" in (err.value.hint or "")
        assert f"--resume={OUT}" in (err.value.hint or "")


def test_a_nonfinite_step_logs_the_good_steps_before_it_and_no_nan():
    backend = ScriptedTrainingBackend(nonfinite_at=5)
    sink, progress = RecordingMetricsSink(), RecordingProgress()
    with pytest.raises(TrainingDiverged):
        train_policy(backend, progress, sink)(train_settings(steps=10, log_freq=3))
    assert sink.steps("train") == [3, 4]
    assert all(r.metrics["loss"] == r.metrics["loss"] for r in sink.records)  # no NaN
    assert sink.closed and progress.tasks[0].closed


def test_nonfinite_data_points_at_the_dataset():
    seen = NonFinite(data=("action (the samples drawn at dataset row 12 of episode 1)",))
    backend = ScriptedTrainingBackend(nonfinite_at=3, nonfinite=seen)
    cfg = train_settings(steps=6, dataset=DatasetSource(root="data/points"))
    with pytest.raises(TrainingDiverged) as err:
        run(backend, cfg)
    assert "the data holds NaN or inf in action" in err.value.message
    assert "dataset row 12 of episode 1" in err.value.message
    assert "rlctl dataset check data/points" in (err.value.hint or "")


def test_nonfinite_after_normalisation_points_at_the_statistics():
    backend = ScriptedTrainingBackend(
        nonfinite_at=2, nonfinite=NonFinite(processed=("observation.state",))
    )
    with pytest.raises(TrainingDiverged) as err:
        run(backend, train_settings(steps=6, dataset=DatasetSource(root="data/points")))
    assert "observation.state" in err.value.message and "normalisation" in err.value.message
    assert "recompute-stats data/points" in (err.value.hint or "")


def test_a_finite_batch_that_diverges_points_at_the_learning_rate():
    backend = ScriptedTrainingBackend(
        nonfinite_at=4, nonfinite=NonFinite(gradients=("model.0.weight",))
    )
    with pytest.raises(TrainingDiverged) as err:
        run(backend, train_settings(steps=6))
    assert "model.0.weight" in err.value.message
    assert "--optimizer.lr, now 0.001" in (err.value.hint or "")


def test_occasional_amp_skips_are_fine_but_an_endless_run_of_them_is_divergence():
    fine = ScriptedTrainingBackend(skipped=(2, 3, 7))
    report, _, _ = run(fine, train_settings(steps=10))
    assert report.steps_done == 10

    endless = ScriptedTrainingBackend(skipped=tuple(range(3, 100)))
    with pytest.raises(TrainingDiverged, match="overflowed in") as err:
        run(endless, train_settings(steps=90, save_freq=2))
    assert "without --use_amp" in (err.value.hint or "")
    assert endless.record.saves[-1] < 2 + MAX_SKIPPED_IN_A_ROW


def test_an_abandoned_save_on_ctrl_c_reports_the_previous_checkpoint():
    backend = ScriptedTrainingBackend(interrupt_at=6, abandon_save_at=5)
    report, _, _ = run(backend, train_settings(steps=10, save_freq=3))
    assert report.interrupted and report.steps_done == 5
    assert backend.record.saves == [3]
    assert report.last_checkpoint is not None and report.last_checkpoint.step == 3
    assert backend.find_checkpoint(OUT).step == 3
    assert backend.record.closed == 1


def test_an_abandoned_periodic_save_is_not_tried_again():
    backend = ScriptedTrainingBackend(abandon_save_at=6)
    report, _, _ = run(backend, train_settings(steps=10, save_freq=3))
    assert report.interrupted and report.steps_done == 6
    assert backend.record.saves == [3]
    assert report.last_checkpoint.step == 3
