"""Training on a dataset with language annotations, as a user types it, and a user's own
DataLoader over `rlctl.api.open_dataset` with `rlctl.api.collate`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch.utils.data import DataLoader

import rlctl.api
from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.timeout(300)


def _support():
    path = Path(__file__).parents[1] / "adapters" / "storage" / "language_support.py"
    spec = importlib.util.spec_from_file_location("language_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _support()

TINY_ACT = [
    "--policy.type=act",
    "--policy.dim_model=16",
    "--policy.n_heads=2",
    "--policy.dim_feedforward=32",
    "--policy.n_encoder_layers=1",
    "--policy.n_decoder_layers=1",
    "--policy.n_vae_encoder_layers=1",
    "--policy.latent_dim=4",
    "--policy.pretrained_backbone_weights=null",
]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def annotated(tmp_path_factory) -> Path:
    return support.write_annotated(tmp_path_factory.mktemp("language") / "ds", camera=True)


def train(root: Path, out: Path, policy: list[str], workers: int) -> None:
    args = [
        "train",
        f"--dataset.root={root}",
        *policy,
        "--policy.chunk_size=3",
        "--policy.n_action_steps=3",
        "--steps=3",
        "--batch_size=4",
        f"--num_workers={workers}",
        "--log_freq=1",
        "--save_freq=3",
        f"--output_dir={out}",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "trained steps 0..3 of 3" in result.output
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 3 and all(loss == loss for loss in losses)  # finite, not NaN


@pytest.mark.parametrize("workers", [0, 2])
def test_an_mlp_trains_on_an_annotated_dataset(annotated, tmp_path, workers):
    train(annotated, tmp_path / "run", ["--policy.type=mlp", "--policy.hidden_dims=[8]"], workers)


@pytest.mark.slow  # a ResNet-18 backbone, a few seconds on a CPU
def test_act_with_a_camera_trains_on_an_annotated_dataset_with_workers(annotated, tmp_path):
    train(annotated, tmp_path / "run", TINY_ACT, workers=2)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_users_dataloader_over_open_dataset_batches_with_rlctl_collate(annotated, workers):
    dataset = rlctl.api.open_dataset(annotated, delta_timestamps={"action": [0.0, 0.1, 0.2]})
    loader = DataLoader(
        dataset, batch_size=5, shuffle=True, num_workers=workers, collate_fn=rlctl.api.collate
    )
    frames = 0
    for batch in loader:
        assert batch["action"].shape[1:] == (3, 2)
        assert batch["observation.images.front"].shape[1:] == (3, 32, 32)
        episodes, ts = batch["episode_index"].tolist(), batch["frame_index"].tolist()
        assert len(batch["language_persistent"]) == len(batch["language_events"]) == len(ts)
        for episode, t, kept, happened in zip(
            episodes, ts, batch["language_persistent"], batch["language_events"], strict=True
        ):
            assert kept[0]["content"] == f"plan {episode}" and len(kept) == episode + 2
            written = support.events(episode, t)
            assert [r["style"] for r in happened] == [r["style"] for r in written]
        frames += len(ts)
    assert frames == sum(support.LENGTHS)
