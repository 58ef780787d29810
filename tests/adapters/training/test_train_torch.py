"""The torch backend end to end on LeRobot's sim_video fixture (75 frames, one 48x64 camera)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.domain.eval_metrics import EvalReport
from rlctl.domain.eval_settings import EvalSettings
from rlctl.domain.train_settings import (
    DatasetSource,
    EmaSettings,
    ImageTransformsSettings,
)


def losses(sink) -> list[float]:
    return [r.metrics["loss"] for r in sink.records if r.phase == "train"]


def test_the_mlp_overfits_a_handful_of_frames(make_settings, train, tiny, sim_video):
    settings = make_settings(
        dataset=DatasetSource(root=str(sim_video), episodes=[0]),
        policy=tiny.mlp(optimizer_lr=3e-3),
        steps=40,
        batch_size=8,
    )
    report, sink = train(settings)
    seen = losses(sink)
    assert len(seen) == 40 and report.steps_done == 40
    assert sum(seen[-5:]) < 0.2 * sum(seen[:5])
    figures = sink.records[-1].metrics
    assert figures["samples_per_s"] > 0 and 0 <= figures["data_wait"] <= 1
    assert figures["lr"] == pytest.approx(3e-3) and figures["grad_norm"] > 0


def test_a_state_only_policy_neither_reads_nor_normalises_cameras(make_settings, train, tmp_path):
    report, _ = train(make_settings(steps=1, save_freq=1))
    policy = load_policy_folder(report.last_checkpoint.location)
    assert set(policy.input_features) == {"observation.state"}
    assert set(policy.output_features) == {"action"}


def test_evaluating_does_not_change_the_training_stream(make_settings, train, tiny, tmp_path):
    def evaluator(policy, settings: EvalSettings) -> EvalReport:
        torch.rand(100)  # a sampling policy draws from the global generator
        chunk = policy.predict_chunk({"observation.state": torch.zeros(1, 6)})
        assert chunk.actions.shape == (1, 5, 6)
        return EvalReport([], eval_s=0.0)

    base = make_settings(policy=tiny.mlp(dropout=0.3), steps=4, eval_freq=0)
    _, plain = train(base)
    with_eval = make_settings(
        policy=tiny.mlp(dropout=0.3), steps=4, eval_freq=2, output_dir=str(tmp_path / "other")
    )
    report, evaluated = train(with_eval, evaluator)
    assert [s for s, _ in report.evaluations] == [2, 4]
    assert losses(evaluated) == losses(plain)


def test_amp_on_cpu_trains_in_float32(make_settings, train):
    report, sink = train(make_settings(use_amp=True))
    assert report.steps_done == 2 and all(torch.isfinite(torch.tensor(losses(sink))))


def _checkpoint_files(checkpoint: Path) -> set[str]:
    return {p.name for p in (checkpoint / "training_state").iterdir()}


@pytest.mark.slow
def test_act_trains_and_its_checkpoint_loads(make_settings, train, tiny, tmp_path):
    report, sink = train(make_settings(policy=tiny.act(), steps=2, save_freq=2))
    checkpoint = Path(report.last_checkpoint.location)
    assert checkpoint == tmp_path / "run" / "checkpoints" / "000002"
    assert (tmp_path / "run" / "checkpoints" / "last").resolve() == checkpoint
    assert {"kld_loss", "l1_loss"} <= set(sink.records[-1].metrics)
    assert _checkpoint_files(checkpoint) == {
        "optimizer_state.safetensors",
        "optimizer_param_groups.json",
        "rng_state.safetensors",
        "training_step.json",
    }
    groups = json.loads((checkpoint / "training_state/optimizer_param_groups.json").read_text())
    assert [g["lr"] for g in groups] == [1e-5, 1e-5]  # the backbone has its own group

    train_config = json.loads((checkpoint / "pretrained_model/train_config.json").read_text())
    assert train_config["policy"]["type"] == "act" and train_config["steps"] == 2
    assert train_config["optimizer"]["type"] == "adamw" and train_config["scheduler"] is None

    policy = load_policy_folder(checkpoint / "pretrained_model")
    observation = {
        "observation.state": torch.zeros(1, 6),
        "observation.images.front": torch.rand(1, 3, 48, 64),
    }
    assert policy.predict_chunk(observation).actions.shape == (1, 5, 6)
    # ImageNet statistics for the camera, as LeRobot's use_imagenet_stats does.
    normalizer = policy.preprocessor[-1]
    mean = normalizer.stats["observation.images.front"]["mean"]
    assert mean.flatten().tolist() == pytest.approx([0.485, 0.456, 0.406])


@pytest.mark.slow
def test_diffusion_with_augmentations_and_ema(make_settings, train, tiny, sim_video, tmp_path):
    settings = make_settings(
        dataset=DatasetSource(
            root=str(sim_video), image_transforms=ImageTransformsSettings(enable=True)
        ),
        policy=tiny.diffusion(),
        num_workers=1,
        steps=2,
        save_freq=2,
        ema=EmaSettings(enable=True, power=0.5),
    )
    report, sink = train(settings)
    checkpoint = Path(report.last_checkpoint.location)
    assert {"scheduler_state.json", "model.safetensors"} <= _checkpoint_files(checkpoint)
    assert sink.records[0].metrics["lr"] == pytest.approx(0.5e-4)  # half-way through warm-up

    averaged = load_file(str(checkpoint / "pretrained_model/model.safetensors"))
    live = load_file(str(checkpoint / "training_state/model.safetensors"))
    assert averaged.keys() == live.keys()
    assert any(not torch.equal(averaged[k], live[k]) for k in live)

    policy = load_policy_folder(checkpoint)
    observation = {
        "observation.state": torch.zeros(1, 2, 6),
        "observation.images.front": torch.rand(1, 2, 3, 48, 64),
    }
    noise = torch.zeros(1, 8, 6)
    assert policy.predict_chunk(observation, noise=noise).actions.shape == (1, 4, 6)
