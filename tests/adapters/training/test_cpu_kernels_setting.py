"""`cpu_kernels` is chosen per training session: it picks the model's modules and whether the
allocator is tuned, and changes nothing a checkpoint holds."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from safetensors.torch import load_file
from torch import nn

from rlctl.adapters.policies.dropout import ThreadedDropout
from rlctl.adapters.training import backend as backend_module
from rlctl.adapters.training.backend import TorchTrainingBackend

from .conftest import start_session


def _dropouts(model: nn.Module) -> set[type]:
    return {type(m) for m in model.modules() if isinstance(m, nn.Dropout)}


def _draw_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("rlctl-dropout")]


def test_two_sessions_in_one_process_each_keep_their_own_kernels(make_settings, tiny, tmp_path):
    before = _draw_threads()
    backend = TorchTrainingBackend()
    auto = start_session(
        make_settings(policy=tiny.mlp(dropout=0.2), output_dir=tmp_path / "auto"), backend
    )
    plain = start_session(
        make_settings(
            policy=tiny.mlp(dropout=0.2), output_dir=tmp_path / "torch", cpu_kernels="torch"
        ),
        backend,
    )
    try:
        assert _dropouts(auto.model) == {ThreadedDropout}
        assert _dropouts(plain.model) == {nn.Dropout}
        for session in (plain, auto, plain):
            assert session.train_step().loss > 0
        assert _dropouts(plain.model) == {nn.Dropout}
    finally:
        auto.close()
        plain.close()
    assert _draw_threads() == before


@pytest.mark.parametrize(
    ("owns_process", "kernels", "tuned"),
    [(True, "auto", True), (True, "torch", False), (False, "auto", False)],
)
def test_the_allocator_is_tuned_only_for_a_process_owner_with_auto_kernels(
    make_settings, monkeypatch, owns_process, kernels, tuned
):
    calls: list[int] = []
    monkeypatch.setattr(backend_module, "keep_freed_memory", lambda: calls.append(1))
    backend = TorchTrainingBackend(keep_freed_memory=owns_process)
    start_session(make_settings(cpu_kernels=kernels), backend).close()
    assert bool(calls) is tuned


def test_checkpoints_are_the_same_whichever_kernels_trained(make_settings, train, tiny, tmp_path):
    folders = {}
    for kernels in ("auto", "torch"):
        settings = make_settings(
            policy=tiny.mlp(dropout=0.2),
            steps=1,
            output_dir=tmp_path / kernels / "run",
            cpu_kernels=kernels,
        )
        report, _ = train(settings)
        folders[kernels] = report.last_checkpoint.location
    auto, plain = (Path(folders[k]) / "pretrained_model" for k in ("auto", "torch"))
    for name in ("config.json", "train_config.json"):
        ours, theirs = (json.loads((folder / name).read_text()) for folder in (auto, plain))
        ours.pop("output_dir", None), theirs.pop("output_dir", None)
        assert ours == theirs, name
    weights = load_file(auto / "model.safetensors"), load_file(plain / "model.safetensors")
    assert weights[0].keys() == weights[1].keys()
