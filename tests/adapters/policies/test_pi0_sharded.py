"""A tiny π0 sharded over two gloo ranks (FSDP2): its wrap units pair each PaliGemma layer with
the action expert's layer of the same depth (joint attention runs them as one step). With the
same batch on both ranks, two SGD steps give the single process's losses and weights, with
and without activation checkpointing; the weights are exported shard by shard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

pytest.importorskip("transformers", reason="π0 needs the smolvla extra")

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.policies.checkpoint import untied_state, write_config
from rlctl.adapters.policies.loaded_policy import create_policy

from .test_pi0 import ACTION, CHUNK, raw_batch, stats, tiny_config

WORKER = Path(__file__).parents[1] / "training" / "pi0_sharded_worker.py"


def test_pi0_declares_its_layer_pairs_as_wrap_units(tiny_paligemma_tokenizer: Path) -> None:
    model = build_policy(tiny_config("pi0"))
    units = model.fsdp_units()
    backbone = model.model.paligemma_with_expert
    pairs = [u for u in units if isinstance(u, tuple)]
    assert pairs == list(zip(backbone.vlm_layers, backbone.expert_layers, strict=True))
    assert len(units) == len(pairs) + len(
        backbone.paligemma.model.vision_tower.vision_model.encoder.layers
    )


@pytest.mark.slow
@pytest.mark.ranks
def test_pi0_on_two_fsdp_ranks_trains_as_one_process(
    tiny_paligemma_tokenizer: Path, tmp_path: Path
) -> None:
    config = tiny_config("pi0")
    policy = create_policy(config, stats())
    raw = raw_batch()
    raw["action"] = np.random.default_rng(2).normal(size=(2, CHUNK, ACTION)).astype(np.float32)
    batch = {
        k: v.contiguous()
        for k, v in policy.preprocessor.process_batch(raw).items()
        if isinstance(v, torch.Tensor)
    }
    save_file(batch, str(tmp_path / "batch.safetensors"))
    write_config(config, tmp_path)

    torch.manual_seed(0)
    model = build_policy(config).train()
    # SGD: Adam would turn the float noise of gradients that are zero in exact arithmetic
    # (attention key biases) into full-size steps, differently in each run.
    optimiser = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    losses = []
    for _ in range(2):
        torch.manual_seed(123)
        loss, _ = model(batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.item()))
    expected = {k: v.detach() for k, v in untied_state(model).items()}

    for checkpointing in (False, True):
        out = tmp_path / f"run-{checkpointing}"
        out.mkdir()
        spec = {"config": str(tmp_path), "batch": str(tmp_path / "batch.safetensors"),
                "out": str(out), "activation_checkpointing": checkpointing}  # fmt: skip
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node=2", str(WORKER), json.dumps(spec)]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
        ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
        np.testing.assert_allclose(ranks[0]["losses"], losses, rtol=1e-5)
        assert ranks[0]["held"] + ranks[1]["held"] == sum(p.numel() for p in model.parameters())
        exported = load_file(str(out / "model.safetensors"))
        assert exported.keys() == expected.keys()
        for key, value in expected.items():
            torch.testing.assert_close(exported[key], value, rtol=1e-5, atol=1e-6, msg=key)
