"""Training on a mixture of datasets: each dataset gets its weight's share of the samples, and
`rlctl train` trains on it through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import rlctl.api
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


def test_weights_near_the_float_limit_share_as_small_ones_do(two):
    data = mixture(two)
    positions = usable_positions(data.episode_lengths())
    huge = sample_probabilities(data, positions, [1e308, 1e308])
    small = sample_probabilities(data, positions, [1.0, 1.0])
    assert huge is not None and small is not None
    assert np.isfinite(huge).all() and np.allclose(huge, small)


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


class CountingDecoder:
    """The default video decoder, counting the frames it is asked for."""

    def __init__(self, calls: list[str]) -> None:
        from rlctl.adapters.video.pyav_decoder import PyAVVideoDecoder

        self.inner = PyAVVideoDecoder()
        self.calls = calls

    def decode(self, path, timestamps, tolerance_s):  # type: ignore[no-untyped-def]
        self.calls.append(str(path))
        return self.inner.decode(path, timestamps, tolerance_s)

    def close(self) -> None:
        self.inner.close()


def state_only_like_sim(root: Path) -> Path:
    """sim_video's state and action (6 each, 10 fps) without its camera."""
    features = {
        k: {"dtype": "float32", "shape": [6], "names": None}
        for k in ("observation.state", "action")
    }
    session = rlctl.api.create_dataset(root, fps=10, features=features)
    for step in range(6):
        value = np.full(6, step / 10, dtype=np.float32)
        session.add_frame({"observation.state": value, "action": value, "task": "hold"})
    session.save_episode()
    session.finalize()
    return root


def test_a_mixture_decodes_no_camera_the_policy_does_not_read_or_not_every_dataset_has(
    fixtures_dir, tmp_path
):
    video, images = fixtures_dir / "sim_video", fixtures_dir / "sim_images"
    camera = "observation.images.front"

    def items(roots, **options):  # type: ignore[no-untyped-def]
        calls: list[str] = []
        dataset = MultiLeRobotTorchDataset(
            roots, video_decoder_factory=lambda: CountingDecoder(calls), **options
        )
        got = dataset.__getitems__([0, 3, len(dataset) - 1])
        return got, calls, dataset

    read, calls, _ = items([video, images])  # the shared camera, read: decoded
    assert calls and all(camera in item for item in read)
    unread, calls, dataset = items([video, images], cameras=["observation.images.other"])
    assert calls == [] and not any(camera in item for item in unread)
    assert dataset.camera_keys == []
    lacking, calls, dataset = items([video, state_only_like_sim(tmp_path / "plain")])
    assert calls == [] and not any(camera in item for item in lacking)
    assert camera in dataset.disabled_features
