"""Gradient accumulation in one process: K micro-batches of B are one step of K x B samples
(the same samples, the same losses and weights)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file


@pytest.mark.slow  # two short trainings: ~6 s on a quiet 2-core host
def test_accumulated_micro_batches_are_one_larger_batch(make_settings, train, tiny, tmp_path):
    # One action per sample: no padding, so each micro-batch's mean weighs alike.
    policy = tiny.mlp(chunk_size=1, n_action_steps=1, hidden_dims=(16,))
    whole, whole_sink = train(
        make_settings(policy=policy, batch_size=8, output_dir=tmp_path / "whole", save_freq=2)
    )
    parts, parts_sink = train(
        make_settings(policy=policy, batch_size=4, grad_accum_steps=2,
                      output_dir=tmp_path / "parts", save_freq=2)
    )  # fmt: skip
    losses = [r.metrics["loss"] for r in whole_sink.records]
    accumulated = [r.metrics["loss"] for r in parts_sink.records]
    assert accumulated == pytest.approx(losses, rel=1e-5)
    assert parts_sink.records[0].metrics["samples_per_s"] > 0
    weights = [
        load_file(str(report.last_checkpoint.location) + "/pretrained_model/model.safetensors")
        for report in (whole, parts)
    ]
    for key in weights[0]:
        torch.testing.assert_close(weights[0][key], weights[1][key], rtol=1e-5, atol=1e-6)
