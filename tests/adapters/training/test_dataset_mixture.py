"""Training on a mixture of datasets: each dataset gets its weight's share of the samples, and
`rlctl train` trains on it through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.torch_dataset import MultiLeRobotTorchDataset
from rlctl.adapters.training.data import TrainingData, sample_probabilities
from rlctl.adapters.training.sampling import StepBatchSampler, usable_positions
from rlctl.domain.dataset_mixture import mixture_meta
from rlctl.entrypoints.cli.main import cli
from tests.adapters.training.points import points_dataset


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("mixture")
    return (
        points_dataset(base / "small", episodes=1, length=10),
        points_dataset(base / "large", episodes=4, length=10),
    )


def mixture(roots) -> TrainingData:
    dataset = MultiLeRobotTorchDataset(list(roots))
    meta, _ = mixture_meta([(str(r), d.meta) for r, d in zip(roots, dataset.datasets)])
    return TrainingData(dataset, Path(roots[0]), meta)


def share_of_first(sampler: StepBatchSampler, steps: int) -> float:
    drawn = [p for step in range(steps) for p, _ in sampler.batch(step)]
    return float(np.mean(np.asarray(drawn) < 10))


def test_weights_decide_each_datasets_share_of_the_samples(two):
    data = mixture(two)
    positions = usable_positions(data.episode_lengths())
    assert len(positions) == 50
    plain = StepBatchSampler(positions, batch_size=10, seed=0)
    assert share_of_first(plain, 500) == pytest.approx(0.2, abs=0.005)  # in proportion to frames
    weights = sample_probabilities(data, positions, [1.0, 1.0])
    assert weights is not None and weights.sum() == pytest.approx(1.0)
    even = StepBatchSampler(positions, batch_size=10, seed=0, probabilities=weights)
    assert share_of_first(even, 500) == pytest.approx(0.5, abs=0.03)
    again = StepBatchSampler(positions, batch_size=10, seed=0, probabilities=weights, start_step=7)
    assert again.batch(7) == even.batch(7)  # still a function of (seed, step): exact resume
    assert sample_probabilities(data, positions, None) is None


def test_rlctl_train_on_two_datasets_with_weights(two, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--dataset.root=[{two[0]}, {two[1]}]",
            "--dataset.weights=[3, 1]",
            "--policy.type=mlp",
            "--policy.hidden_dims=[8]",
            "--steps=3",
            "--batch_size=4",
            "--num_workers=0",
            "--save_freq=3",
            f"--output_dir={out}",
        ],
    )
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "rlctl_config.json").read_text())
    assert saved["dataset"]["root"] == [str(two[0]), str(two[1])]
    assert saved["dataset"]["weights"] == [3.0, 1.0]
    assert (out / "checkpoints" / "000003" / "pretrained_model" / "model.safetensors").is_file()
    refused = CliRunner().invoke(
        cli,
        ["train", f"--dataset.root=[{two[0]}, {two[1]}]", "--dataset.weights=[1]",
         "--policy.type=mlp", f"--output_dir={tmp_path / 'no'}"],
    )  # fmt: skip
    assert refused.exit_code == 1 and "1 weights for 2 dataset(s)" in refused.output
