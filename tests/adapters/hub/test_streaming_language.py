"""A dataset with language annotations, streamed from the fake Hub: items carry the rows the local
reader returns, batches keep them per item (with loader workers), and `rlctl train` trains."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.storage.collate import collate_items
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.streaming.dataset import StreamingLeRobotDataset
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest

pytestmark = pytest.mark.timeout(120)

REPO = "alice/annotated"
LANGUAGE = ("language_persistent", "language_events")


def _support():
    path = Path(__file__).parents[1] / "storage" / "language_support.py"
    spec = importlib.util.spec_from_file_location("language_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _support()


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    return support.write_annotated(tmp_path_factory.mktemp("annotated") / "local")


@pytest.fixture
def pushed(fake_hub, hub_env, written) -> Path:
    PushDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())(
        PushDatasetRequest(str(written), REPO)
    )
    return written


def test_streamed_batches_keep_each_items_rows_as_the_local_reader_reads_them(pushed):
    local = LeRobotDatasetReader(pushed)
    streamed = StreamingLeRobotDataset(REPO, buffer_size=4, seed=1)
    loader = DataLoader(streamed, batch_size=4, num_workers=2, collate_fn=collate_items)

    seen = []
    for batch in loader:
        assert batch["observation.state"].shape == (len(batch["index"]), 2)
        for row, position in enumerate(batch["index"].tolist()):
            want = local[position]
            for key in LANGUAGE:
                assert batch[key][row] == want[key], (key, position)
            seen.append(position)
    assert sorted(seen) == list(range(len(local)))


def test_rlctl_train_streams_an_annotated_dataset(pushed, tmp_path):
    from click.testing import CliRunner

    from rlctl.entrypoints.cli.main import cli

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = CliRunner().invoke(
            cli,
            [
                "train",
                f"--dataset.repo_id={REPO}",
                "--dataset.streaming=true",
                "--policy.type=mlp",
                "--policy.chunk_size=3",
                "--policy.n_action_steps=3",
                "--policy.hidden_dims=[8]",
                "--steps=3",
                "--batch_size=4",
                "--num_workers=2",
                "--save_freq=3",
                f"--output_dir={tmp_path / 'run'}",
            ],
        )
    finally:
        torch.set_num_threads(before)
    assert result.exit_code == 0, result.output
    assert "trained steps 0..3 of 3" in result.output
