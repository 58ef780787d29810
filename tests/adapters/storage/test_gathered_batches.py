"""A numbers-only dataset's batch gathered from its columns at once equals the batch collated
from its items, whatever the indices, windows and episodes chosen."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

import rlctl.api
from rlctl.adapters.storage.collate import collate_items
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.training.sampling import AugmentedItems, GatheredBatches, batch_as_is
from rlctl.domain.errors import NotSupported

FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [3], "names": ["a", "b", "c"]},
    "action": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
    "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    "next.done": {"dtype": "bool", "shape": [1], "names": None},
}
LENGTHS = [7, 3, 11, 5]


@pytest.fixture(scope="module")
def numbers(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("numbers") / "ds"
    session = rlctl.api.create_dataset(root, fps=10, features=FEATURES)
    rng = np.random.default_rng(3)
    for episode, length in enumerate(LENGTHS):
        for i in range(length):
            session.add_frame(
                {
                    "observation.state": rng.normal(size=3).astype(np.float32),
                    "action": rng.normal(size=2).astype(np.float32),
                    "next.reward": np.array([rng.normal()], np.float32),
                    "next.done": np.array([i == length - 1]),
                    "task": f"task {episode % 2}",
                }
            )
        session.save_episode()
    session.finalize()
    return root


def same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


WINDOWS = st.sampled_from(
    [
        None,
        {"action": [0.0, 0.1, 0.2, 0.3, 0.4]},
        {"observation.state": [-0.2, -0.1, 0.0], "action": [-0.1, 0.0, 0.5, 1.0]},
        {"next.reward": [0.0, 0.1], "next.done": [0.0]},
    ]
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    windows=WINDOWS,
    episodes=st.sampled_from([None, [1, 2], [3], [0, 3]]),
    data=st.data(),
)
def test_a_gathered_batch_is_the_collated_items(numbers, windows, episodes, data):
    reader = LeRobotDatasetReader(numbers, delta_timestamps=windows, episodes=episodes)
    assert reader.gathers
    size = len(reader)
    indices = data.draw(st.lists(st.integers(-size, size - 1), min_size=1, max_size=12))
    same(reader.gather(indices), collate_items(reader.get_items(indices)))


def test_the_loader_gives_the_same_batches_either_way(numbers):
    reader = LeRobotDatasetReader(numbers, delta_timestamps={"action": [0.0, 0.1, 0.2]})
    keys = [[(3, 1), (0, 2), (20, 3)], [(25, 0), (25, 0)]]
    gathered = DataLoader(GatheredBatches(reader), batch_sampler=keys, collate_fn=batch_as_is)
    items = DataLoader(
        AugmentedItems(reader, [], None), batch_sampler=keys, collate_fn=collate_items
    )
    for a, b in zip(gathered, items, strict=True):
        same(a, b)


def test_an_index_out_of_range_is_refused_as_for_items(numbers):
    reader = LeRobotDatasetReader(numbers)
    with pytest.raises(IndexError, match="out of range"):
        reader.gather([0, sum(LENGTHS)])
    with pytest.raises(IndexError, match="out of range"):
        reader.gather(np.array([-sum(LENGTHS) - 1, 0]))
    with pytest.raises(TypeError, match="must be integers"):
        reader.gather([0.5])
    # Negative indices count from the end, in a list or an array, as for items.
    same(reader.gather([-1, 0]), reader.gather(np.array([sum(LENGTHS) - 1, 0])))


def test_a_dataset_with_cameras_or_transforms_builds_items(numbers, tmp_path):
    reader = LeRobotDatasetReader(numbers)
    reader.set_image_transforms(lambda image: image)
    assert not reader.gathers
    with pytest.raises(NotSupported, match="cannot be gathered"):
        reader.gather([0])
    camera = {"observation.images.top": {"dtype": "image", "shape": [8, 8, 3], "names": None}}
    session = rlctl.api.create_dataset(tmp_path / "cam", fps=10, features={**FEATURES, **camera})
    frame = {
        "observation.state": np.zeros(3, np.float32),
        "action": np.zeros(2, np.float32),
        "next.reward": np.zeros(1, np.float32),
        "next.done": np.zeros(1, bool),
        "observation.images.top": np.zeros((8, 8, 3), np.uint8),
        "task": "look",
    }
    for _ in range(2):
        session.add_frame(frame)
    session.save_episode()
    session.finalize()
    assert not LeRobotDatasetReader(tmp_path / "cam").gathers
