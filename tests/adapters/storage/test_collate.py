"""Batching items with language annotations: the rows stay per item, in order; the rest is
torch's default collate. On a dataset written with rlctl, in a DataLoader with and without
workers (where torch's default collate fails)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from rlctl.adapters.storage.collate import collate_items
from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset
from rlctl.domain.errors import FeatureMismatch

pytestmark = pytest.mark.timeout(120)


def _support():
    path = Path(__file__).parent / "language_support.py"
    spec = importlib.util.spec_from_file_location("language_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _support()


def item(n: int, rows: int) -> dict:
    return {
        "observation.state": torch.full((2,), float(n)),
        "index": torch.tensor(n),
        "task": f"task {n}",
        "language_persistent": [{"content": f"row {n}.{k}", "camera": None} for k in range(rows)],
        "language_events": [] if n % 2 else [{"content": None, "tool_calls": [{"n": n}]}],
    }


def test_language_rows_stay_per_item_in_order_and_the_rest_is_default_collated():
    items = [item(n, rows=n + 1) for n in (3, 0, 2)]
    batch = collate_items(items)

    assert batch["language_persistent"] == [i["language_persistent"] for i in items]
    assert batch["language_events"] == [i["language_events"] for i in items]
    rest = default_collate([{k: v for k, v in i.items() if "language" not in k} for i in items])
    assert batch.keys() == {*rest.keys(), "language_persistent", "language_events"}
    assert torch.equal(batch["observation.state"], rest["observation.state"])
    assert batch["index"].tolist() == [3, 0, 2] and batch["task"] == ["task 3", "task 0", "task 2"]
    with pytest.raises((TypeError, RuntimeError)):  # what the collate is for
        default_collate(items)


def test_items_without_language_collate_as_by_default():
    items = [{"a": torch.tensor([n, n]), "task": "t"} for n in range(3)]
    batch = collate_items(items)
    assert batch["a"].tolist() == [[0, 0], [1, 1], [2, 2]] and batch["task"] == ["t"] * 3


def test_none_items_are_left_out_as_lerobot_leaves_them():
    items = [item(1, rows=1), None, item(2, rows=2)]
    batch = collate_items(items)
    assert batch["index"].tolist() == [1, 2]
    assert [len(rows) for rows in batch["language_persistent"]] == [1, 2]
    assert collate_items([None, None]) is None


def test_a_batch_whose_items_disagree_on_a_language_key_is_refused():
    partial = {k: v for k, v in item(1, rows=1).items() if k != "language_events"}
    with pytest.raises(FeatureMismatch, match="1 of the 2 items") as error:
        collate_items([item(0, rows=1), partial])
    assert error.value.where == "batch key 'language_events'"


@pytest.fixture(scope="module")
def annotated(tmp_path_factory) -> Path:
    return support.write_annotated(tmp_path_factory.mktemp("language") / "ds")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_over_an_annotated_dataset_batches_each_items_rows(annotated, workers):
    dataset = LeRobotTorchDataset(annotated, delta_timestamps={"action": [0.0, 0.1]})
    loader = DataLoader(dataset, batch_size=4, num_workers=workers, collate_fn=collate_items)
    seen = 0
    for batch in loader:
        positions = batch["index"].tolist()
        assert batch["action"].shape == (len(positions), 2, 2)
        for row, position in enumerate(positions):
            episode, t = batch["episode_index"][row].item(), batch["frame_index"][row].item()
            assert [r["content"] for r in batch["language_persistent"][row]] == [
                r["content"] for r in support.persistent(episode)
            ]
            assert [r["content"] for r in batch["language_events"][row]] == [
                r["content"] for r in support.events(episode, t)
            ]
            assert batch["language_persistent"][row] == dataset[position]["language_persistent"]
        seen += len(positions)
    assert seen == sum(support.LENGTHS)
    with pytest.raises((TypeError, RuntimeError)):
        next(iter(DataLoader(dataset, batch_size=4)))
