"""A numbers-only dataset batched from memory: the same batches as built item by item, the
columns normalised once to the same bits as normalising each batch, an edit in place noticed
within an epoch, and a training run that steps to the same losses either way."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlctl.api
from rlctl.adapters.policies.processors import DeviceConfig, DeviceStep
from rlctl.adapters.storage.collate import collate_items
from rlctl.adapters.storage.lerobot_v3.identity import DatasetChanged
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset
from rlctl.adapters.training import column_batches as module
from rlctl.adapters.training.backend import TorchTrainingBackend
from rlctl.adapters.training.column_batches import ColumnBatches, column_batches, split_normalizer
from rlctl.adapters.training.sampling import StepBatchSampler
from rlctl.domain.features import FeatureKind
from rlctl.domain.processors import ProcessorPipeline
from rlctl.domain.processors.steps.normalize import (
    NormalizedFeature,
    Normalizer,
    NormalizerConfig,
    NormMode,
)
from rlctl.domain.processors.steps.rename import RenameConfig, RenameObservations
from rlctl.domain.processors.steps.to_batch import AddBatchDimension

from .conftest import settings_for, start_session, tiny_mlp

FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [3], "names": ["a", "b", "c"]},
    "observation.environment_state": {"dtype": "float32", "shape": [1], "names": None},
    "action": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
    "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    "next.done": {"dtype": "bool", "shape": [1], "names": None},
}
ENV = FEATURES["observation.environment_state"]
LENGTHS = [7, 3, 11, 5]
WINDOWS = st.sampled_from(
    [
        None,
        {"action": [0.0, 0.1, 0.2, 0.3, 0.4]},
        {"observation.state": [-0.2, -0.1, 0.0], "action": [-0.1, 0.0, 0.5, 1.0]},
        {"next.reward": [0.0, 0.1], "observation.environment_state": [-0.1, 0.0]},
    ]
)
SLOW_EXAMPLES = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def write_numbers(root: Path, env_size: int = 1) -> Path:
    features = {**FEATURES, "observation.environment_state": {**ENV, "shape": [env_size]}}
    session = rlctl.api.create_dataset(root, fps=10, features=features)
    rng = np.random.default_rng(3)
    for episode, length in enumerate(LENGTHS):
        for i in range(length):
            session.add_frame(
                {
                    "observation.state": rng.normal(size=3).astype(np.float32) * 40,
                    "observation.environment_state": rng.normal(size=env_size).astype(np.float32),
                    "action": rng.normal(size=2).astype(np.float32) * 3 + 1,
                    "next.reward": np.array([rng.normal()], np.float32),
                    "next.done": np.array([i == length - 1]),
                    "task": f"task {episode % 2}",
                }
            )
        session.save_episode()
    session.finalize()
    return root


@pytest.fixture(scope="module")
def numbers(tmp_path_factory) -> Path:
    return write_numbers(tmp_path_factory.mktemp("numbers") / "ds")


def same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert a[key].is_contiguous(), key
            assert torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def sampler_over(reader, data) -> StepBatchSampler:
    world = data.draw(st.integers(1, 3), label="world")
    positions = np.arange(len(reader))
    if data.draw(st.booleans(), label="drop last frames"):
        positions = positions[positions % 3 != 0]
    return StepBatchSampler(
        positions,
        batch_size=data.draw(st.integers(1, 40), label="batch"),  # may exceed the dataset
        seed=data.draw(st.integers(0, 2**31 - 1), label="seed"),
        start_step=data.draw(st.integers(0, 20), label="start"),
        rank=data.draw(st.integers(0, world - 1), label="rank"),
        world_size=world,
        sample_seeds=False,
    )


@SLOW_EXAMPLES
@given(windows=WINDOWS, episodes=st.sampled_from([None, [1, 2], [3], [0, 3]]), data=st.data())
def test_batches_from_memory_are_the_items_collated(numbers, windows, episodes, data):
    reader = LeRobotDatasetReader(numbers, delta_timestamps=windows, episodes=episodes)
    sampler = sampler_over(reader, data)
    batches = ColumnBatches(reader.numeric_columns(), sampler, check_unchanged=lambda: None)
    for step in range(sampler.start_step, sampler.start_step + 4):
        expected = collate_items(reader.get_items([p for p, _ in sampler.batch(step)]))
        same(next(batches), expected)


def normalizing_pipeline(modes: dict[FeatureKind, NormMode], stats: dict) -> ProcessorPipeline:
    kinds = {
        "observation.state": FeatureKind.STATE,
        "observation.environment_state": FeatureKind.ENV,
        "action": FeatureKind.ACTION,
        "next.reward": FeatureKind.REWARD,
    }
    config = NormalizerConfig(
        features={key: NormalizedFeature(kind, ()) for key, kind in kinds.items()},
        norm_map=modes,
    )
    return ProcessorPipeline(
        [
            RenameObservations(RenameConfig({})),
            AddBatchDimension(),
            DeviceStep(DeviceConfig("cpu")),
            Normalizer(config, stats),
        ]
    )


def random_stats(rng: np.random.Generator) -> dict:
    stats = {}
    for key, size in (
        ("observation.state", 3),
        ("observation.environment_state", 1),
        ("action", 2),
        ("next.reward", 1),
    ):
        low = rng.normal(size=size) * 5
        high = low + np.abs(rng.normal(size=size)) * 7
        high[0] = low[0]  # a constant feature: the span becomes eps
        stats[key] = {
            "mean": rng.normal(size=size) * 3, "std": np.abs(rng.normal(size=size)) * 2,
            "min": low, "max": high, "q01": low, "q99": high, "q10": low + 0.1, "q90": high,
        }  # fmt: skip
    return stats


MODES = st.sampled_from([m for m in NormMode])


@SLOW_EXAMPLES
@given(
    windows=WINDOWS,
    state=MODES,
    env=MODES,
    action=MODES,
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_columns_normalised_once_are_the_batches_normalised(
    numbers, windows, state, env, action, seed, data
):
    """Bit for bit: the normaliser's elementwise operations give the same floats on a column as
    on the rows gathered from it."""
    reader = LeRobotDatasetReader(numbers, delta_timestamps=windows)
    modes = {FeatureKind.STATE: state, FeatureKind.ENV: env, FeatureKind.ACTION: action}
    pipeline = normalizing_pipeline(modes, random_stats(np.random.default_rng(seed)))
    sampler = sampler_over(reader, data)
    found = column_batches(LeRobotTorchDataset.from_reader(reader), sampler, pipeline)
    assert found is not None
    batches, rest = found
    assert not any(isinstance(step, Normalizer) for step in rest)
    for step in range(sampler.start_step, sampler.start_step + 3):
        items = collate_items(reader.get_items([p for p, _ in sampler.batch(step)]))
        same(rest.process_batch(next(batches)), pipeline.process_batch(items))


def test_a_step_changing_values_before_the_normaliser_keeps_it_per_batch():
    stats = random_stats(np.random.default_rng(0))
    modes = {FeatureKind.ACTION: NormMode.MEAN_STD}
    pipeline = normalizing_pipeline(modes, stats)
    normalizer, rest = split_normalizer(pipeline)
    assert normalizer is pipeline.steps[-1] and len(rest) == 3
    for changing in (
        RenameObservations(RenameConfig({"observation.state": "observation.other"})),
        DeviceStep(DeviceConfig("cpu", float_dtype="bfloat16")),
        DeviceStep(DeviceConfig("cuda")),  # normalised there per batch, as before
    ):
        steps = [changing, *pipeline.steps]
        normalizer, rest = split_normalizer(ProcessorPipeline(steps))
        assert normalizer is None and list(rest) == steps


def test_one_number_per_sample_keeps_the_batch_axis_step(numbers):
    """AddBatchDimension turns a 1-D state batch into (1, batch), as LeRobot's: kept then."""
    reader = LeRobotDatasetReader(numbers)
    pipeline = normalizing_pipeline({}, {})
    sampler = StepBatchSampler(np.arange(len(reader)), batch_size=4, seed=1, sample_seeds=False)
    batches, rest = column_batches(LeRobotTorchDataset.from_reader(reader), sampler, pipeline)
    assert [type(step) for step in rest] == [AddBatchDimension]  # environment_state is (1,)
    items = collate_items(reader.get_items(sampler.frames(0).tolist()))
    same(rest.process_batch(next(batches)), pipeline.process_batch(items))


def test_an_edit_in_place_stops_the_batches_at_the_next_epoch(numbers, tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(numbers, root)
    reader = LeRobotDatasetReader(root)
    size = len(reader)
    sampler = StepBatchSampler(np.arange(size), batch_size=size // 2, seed=1, sample_seeds=False)
    batches, _ = column_batches(
        LeRobotTorchDataset.from_reader(reader), sampler, ProcessorPipeline()
    )
    next(batches)
    swapped = tmp_path / "new"
    shutil.copytree(root, swapped)
    shutil.rmtree(root)
    swapped.rename(root)  # another folder at the dataset's path, as an edit in place leaves it
    next(batches)  # the rest of the epoch is the rows read when it was opened
    with pytest.raises(DatasetChanged, match="changed while it was open"):
        next(batches)


def test_a_dataset_too_big_for_the_budget_goes_through_the_loader(numbers, monkeypatch):
    reader = LeRobotDatasetReader(numbers, delta_timestamps={"action": [0.0, 0.1]})
    dataset = LeRobotTorchDataset.from_reader(reader)
    sampler = StepBatchSampler(np.arange(len(reader)), batch_size=4, seed=1)
    assert column_batches(dataset, sampler, ProcessorPipeline()) is not None
    monkeypatch.setattr(module, "MEMORY_BUDGET_BYTES", 1000)
    assert column_batches(dataset, sampler, ProcessorPipeline()) is None


@pytest.mark.slow  # two training sessions
def test_training_from_memory_steps_as_through_the_loader(tmp_path):
    numbers = write_numbers(tmp_path / "ds", env_size=2)  # the MLP reads a (1,) one as (1, B)
    losses = {}
    for in_memory in (True, False):
        run = settings_for(
            numbers, tmp_path / str(in_memory), policy=tiny_mlp(), steps=6, batch_size=8
        )
        session = start_session(run, TorchTrainingBackend(in_memory_batches=in_memory))
        try:
            assert isinstance(session._p.batches, ColumnBatches) is in_memory
            losses[in_memory] = [session.train_step().loss for _ in range(6)]
        finally:
            session.close()
    assert losses[True] == losses[False]
