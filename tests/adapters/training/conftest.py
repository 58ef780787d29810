"""Tiny policies and a quiet TrainPolicy for the torch training backend's tests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from dependency_injector import providers

from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.training.backend import TorchTrainingBackend
from rlctl.adapters.training.session import TorchTrainingSession
from rlctl.application.use_cases.train_policy import TrainPolicy, TrainReport
from rlctl.domain.policies import ACTConfig, DiffusionConfig, MLPConfig
from rlctl.domain.train_settings import DatasetSource, TrainSettings
from rlctl.entrypoints.container import build_container


def tiny_mlp(**overrides) -> MLPConfig:
    return MLPConfig(**{"chunk_size": 5, "n_action_steps": 5, "hidden_dims": (64, 64), **overrides})


def tiny_act(**overrides) -> ACTConfig:
    fields = dict(
        chunk_size=5, n_action_steps=5, dim_model=32, n_heads=2, dim_feedforward=64,
        n_encoder_layers=1, n_vae_encoder_layers=1, latent_dim=8, pretrained_backbone_weights=None,
    )  # fmt: skip
    return ACTConfig(**{**fields, **overrides})


def tiny_diffusion(**overrides) -> DiffusionConfig:
    fields = dict(
        n_obs_steps=2, horizon=8, n_action_steps=4, down_dims=(16, 32), kernel_size=3, n_groups=4,
        diffusion_step_embed_dim=16, num_inference_steps=4, pretrained_backbone_weights=None,
        spatial_softmax_num_keypoints=8, crop_shape=(40, 56), noise_scheduler_type="DDIM",
        scheduler_warmup_steps=2,
    )  # fmt: skip
    return DiffusionConfig(**{**fields, **overrides})


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models on a shared 2-core machine: a second OpenMP thread only adds waiting."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def sim_video(fixtures_dir: Path) -> Path:
    return fixtures_dir / "sim_video"


@pytest.fixture(scope="session")
def tiny():
    """Factories of tiny policy configs: `tiny.mlp()`, `tiny.act()`, `tiny.diffusion()`."""
    return SimpleNamespace(mlp=tiny_mlp, act=tiny_act, diffusion=tiny_diffusion)


@pytest.fixture
def make_settings(sim_video: Path, tmp_path: Path):
    """TrainSettings on sim_video into tmp_path/run: two MLP steps unless overridden."""

    def make(**overrides) -> TrainSettings:
        return settings_for(sim_video, overrides.pop("output_dir", tmp_path / "run"), **overrides)

    return make


@pytest.fixture(scope="session")
def train():
    """Run TrainPolicy with the torch backend; returns (report, recorded metrics)."""
    return run_training


def settings_for(root: Path, output_dir: Path, **overrides) -> TrainSettings:
    fields = dict(
        dataset=DatasetSource(root=str(root)), policy=tiny_mlp(), output_dir=str(output_dir),
        steps=2, batch_size=4, num_workers=0, log_freq=1, save_freq=0, eval_freq=0,
    )  # fmt: skip
    return TrainSettings(**{**fields, **overrides})


def train_policy(
    sink: RecordingMetricsSink, evaluator=None, *, backend: TorchTrainingBackend | None = None
) -> TrainPolicy:
    """TrainPolicy as the container composes it (the torch backend, real dataset resolution)."""
    container = build_container()
    container.progress.override(providers.Object(RecordingProgress()))
    if backend is not None:
        container.training_backend.override(providers.Object(backend))
    return container.train_policy(metrics=sink, evaluator=evaluator)


def run_training(
    settings: TrainSettings, evaluator=None
) -> tuple[TrainReport, RecordingMetricsSink]:
    sink = RecordingMetricsSink()
    report = train_policy(sink, evaluator)(settings)
    return report, sink


def start_session(
    settings: TrainSettings, backend: TorchTrainingBackend | None = None
) -> TorchTrainingSession:
    """A new run's session, planned as `TrainPolicy` plans it, for tests that step by hand."""
    backend = backend or TorchTrainingBackend()
    processes = backend.join(settings)
    try:
        return processes.start(build_container().plan_training()(settings, None, processes))
    except BaseException:
        processes.close()
        raise
