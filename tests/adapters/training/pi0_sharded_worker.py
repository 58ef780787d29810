"""One rank of the tiny-π0 FSDP test: the same batch on every rank, two SGD steps, then the
weights exported shard by shard and the training state saved through DCP.

`python -m torch.distributed.run --standalone --nproc_per_node=N pi0_sharded_worker.py SPEC`,
SPEC a JSON object: config (a folder holding the π0 config.json), batch (a safetensors file
of the processed batch), out, and optionally activation_checkpointing. Writes
OUT/rank<r>.json (losses, parameters held) and OUT/model.safetensors.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.policies.checkpoint import read_config
from rlctl.adapters.training.distributed import start_world
from rlctl.adapters.training.precision import Precision
from rlctl.adapters.training.sharded_checkpoint import export_weights, save_sharded
from rlctl.adapters.training.sharding import (
    builds_on_meta,
    empty_model,
    shard_model,
    sharded_numel,
)
from rlctl.domain.train_settings import DistributedSettings


def main() -> None:
    spec = json.loads(sys.argv[1])
    out = Path(spec["out"])
    torch.set_num_threads(1)
    settings = DistributedSettings(
        strategy=spec.get("strategy", "fsdp"),
        activation_checkpointing=spec.get("activation_checkpointing", False),
    )
    world = start_world("cpu", settings)
    torch.manual_seed(0)
    config = read_config(Path(spec["config"]))
    # As training builds it: whole on rank 0, on the meta device on the others.
    model = empty_model(config) if builds_on_meta(world) else None
    model = (build_policy(config) if model is None else model).train()
    shard_model(model, world, settings, Precision())
    # SGD: Adam would turn the float noise of gradients that are zero in exact arithmetic
    # (attention key biases) into full-size steps, differently in each run.
    optimiser = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    batch = load_file(spec["batch"])
    losses = []
    for _ in range(2):
        torch.manual_seed(123)  # the same noise and times on every rank and in the reference
        loss, _ = model(batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.item()))
    export_weights(out / "model.safetensors", model, world)
    save_sharded(out / "distributed", model, optimiser)
    (out / f"rank{world.rank}.json").write_text(
        json.dumps({"losses": losses, "held": sharded_numel(model)})
    )
    world.close()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
