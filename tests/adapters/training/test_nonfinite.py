"""Nothing non-finite is trained on or saved, with the torch backend on a tiny points dataset:
NaN statistics are refused before step 1, a NaN in one data row stops the run at the step that
first draws it (the last good checkpoint stays loadable and resumable), a learning rate that
blows up stops with the learning-rate hint, and non-finite weights are never written."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.numpy import load_file, save_file

from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.adapters.policies.errors import CheckpointError
from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.adapters.training.checkpoints import find_checkpoint
from rlctl.adapters.training.sampling import StepBatchSampler
from rlctl.application.ports.training import TrainingDiverged
from rlctl.application.use_cases.train_policy import TrainReport
from rlctl.domain.errors import DatasetError
from rlctl.domain.train_settings import DatasetSource, OptimizerOverrides, TrainSettings
from tests.adapters.training.points import data_file, points_dataset, set_action, set_stat

from .conftest import start_session, tiny_mlp, train_policy

EPISODES, LENGTH, CHUNK, BATCH, SEED = 2, 10, 2, 2, 1


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("points") / "ds"
    return points_dataset(root, episodes=EPISODES, length=LENGTH)


@pytest.fixture
def dataset(clean: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(clean, tmp_path / "ds"))


def settings(root: Path, out: Path, **overrides) -> TrainSettings:
    fields = dict(
        dataset=DatasetSource(root=str(root)),
        policy=tiny_mlp(chunk_size=CHUNK, n_action_steps=CHUNK, hidden_dims=(16, 16)),
        output_dir=str(out), steps=30, batch_size=BATCH, num_workers=0, log_freq=1,
        save_freq=2, eval_freq=0, seed=SEED,
    )  # fmt: skip
    return TrainSettings(**{**fields, **overrides})


def train(cfg: TrainSettings, sink: RecordingMetricsSink | None = None) -> TrainReport:
    return train_policy(sink or RecordingMetricsSink())(cfg)


def first_step_drawing(row: int) -> int:
    """The 1-based step whose batch first holds a sample whose action window covers `row`."""
    sampler = StepBatchSampler(np.arange(EPISODES * LENGTH), batch_size=BATCH, seed=SEED)
    for step in range(1000):
        frames = [frame for frame, _ in sampler.batch(step)]
        if any(f <= row < f + CHUNK and f // LENGTH == row // LENGTH for f in frames):
            return step + 1
    raise AssertionError("never drawn")


def test_nan_statistics_are_refused_before_the_first_step(dataset, tmp_path):
    set_stat(dataset, "observation.state", "std", 1, float("nan"))
    out = tmp_path / "run"
    sink = RecordingMetricsSink()
    with pytest.raises(DatasetError) as err:
        train(settings(dataset, out), sink)
    assert err.value.where == f"{dataset / 'meta' / 'stats.json'}: observation.state.std"
    assert "element 1 (y)" in err.value.message
    assert "recompute-stats" in (err.value.hint or "")
    assert not (out / "checkpoints").exists() and sink.records == []


def test_infinite_action_statistics_are_refused_too(dataset, tmp_path):
    set_stat(dataset, "action", "mean", 0, float("inf"))
    with pytest.raises(DatasetError, match="mean statistic of action is not finite"):
        train(settings(dataset, tmp_path / "run"))


def test_a_zero_std_is_not_an_error(dataset, tmp_path):
    set_stat(dataset, "observation.state", "std", 0, 0.0)  # LeRobot's eps handles it
    report = train(settings(dataset, tmp_path / "run", steps=2))
    assert report.steps_done == 2


def test_a_nan_data_row_stops_at_the_step_that_draws_it_and_the_last_good_checkpoint_resumes(
    dataset, tmp_path
):
    # The row of episode 1 drawn last, so that good checkpoints come before it.
    row = max(range(LENGTH + 1, 2 * LENGTH - 1), key=first_step_drawing)
    bad_step = first_step_drawing(row)
    assert bad_step >= 3
    original = pq.read_table(data_file(dataset)).column("action").to_pylist()[row][0]
    set_action(dataset, row, 0, float("nan"))
    out = tmp_path / "run"

    sink = RecordingMetricsSink()
    with pytest.raises(TrainingDiverged) as err:
        train(settings(dataset, out), sink)
    assert f"stopped at step {bad_step}:" in err.value.message
    assert "the data holds NaN or inf in action" in err.value.message
    assert "of episode 1" in err.value.message
    assert f"rlctl dataset check {dataset}" in (err.value.hint or "")
    assert sink.steps("train") == list(range(1, bad_step))
    assert all(math.isfinite(r.metrics["loss"]) for r in sink.records)

    kept = find_checkpoint(out)
    good = (bad_step - 1) // 2 * 2
    assert kept is not None and kept.step == good
    saved = sorted(p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith("."))
    assert saved == [*(f"{s:06d}" for s in range(2, good + 1, 2)), "last"]
    assert f"(step {good}) is kept" in (err.value.hint or "")
    policy = load_policy_folder(out / "checkpoints" / "last" / "pretrained_model")
    assert all(torch.isfinite(t).all() for t in policy.model.state_dict().values())

    # Fixed data: the run resumes from the kept checkpoint and goes past the bad step.
    set_action(dataset, row, 0, original)
    report = train(settings(dataset, out, steps=bad_step + 1, resume=str(out)))
    assert (report.start_step, report.steps_done) == (good, bad_step + 1)


def test_a_learning_rate_that_blows_up_stops_with_the_learning_rate_hint(dataset, tmp_path):
    out = tmp_path / "run"
    huge = settings(dataset, out, optimizer=OptimizerOverrides(lr=1e30), save_freq=1)
    with pytest.raises(TrainingDiverged) as err:
        train(huge)
    assert "although the batch was finite" in err.value.message
    assert "--optimizer.lr, now 1e+30" in (err.value.hint or "")
    kept = find_checkpoint(out)
    assert kept is None or f"stopped at step {kept.step + 1}:" in err.value.message
    assert kept is None or "start again with a lower rate" in (err.value.hint or "")


def test_nonfinite_weights_are_never_written(dataset, tmp_path):
    out = tmp_path / "run"
    session = start_session(settings(dataset, out))
    try:
        session.train_step()
        with torch.no_grad():
            next(session.model.parameters()).view(-1)[0] = float("nan")
        with pytest.raises(TrainingDiverged, match="weights are NaN or inf after step 1"):
            session.save_checkpoint()
    finally:
        session.close()
    assert find_checkpoint(out) is None
    assert not any((out / "checkpoints").glob("*")) if (out / "checkpoints").exists() else True


def test_damaged_statistics_in_a_checkpoint_are_refused_on_resume(dataset, tmp_path):
    out = tmp_path / "run"
    train(settings(dataset, out, steps=2))
    pretrained = out / "checkpoints" / "last" / "pretrained_model"
    state_file = next(pretrained.glob("policy_preprocessor_step_*normalizer*.safetensors"))
    arrays = load_file(str(state_file))
    arrays["observation.state.mean"][0] = np.nan
    save_file(arrays, str(state_file))
    with pytest.raises(CheckpointError) as err:
        train(settings(dataset, out, steps=4, resume=str(out)))
    assert "observation.state.mean" in (err.value.where or "")
    assert "policy_preprocessor.json" in (err.value.where or "")
