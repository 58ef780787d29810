"""One rank of the wrap-unit test of every policy type: for each case in turn, the same batch on
every rank, two SGD steps under FSDP (the policy's own wrap units), then the weights exported
shard by shard.

`python -m torch.distributed.run --standalone --nproc_per_node=N policies_sharded_worker.py SPEC`,
SPEC a JSON object: cases, each {kind, config (a folder holding config.json and
batch.safetensors), out, lr (SGD's step, 0.05 unless given)}. Writes OUT/rank<r>.json
(losses, parameters held, units, whether built on the meta device) and OUT/model.safetensors
for each case.
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
from rlctl.adapters.training.sharded_checkpoint import export_weights
from rlctl.adapters.training.sharding import (
    builds_on_meta,
    empty_model,
    shard_model,
    sharded_numel,
)
from rlctl.domain.train_settings import DistributedSettings


def main() -> None:
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    settings = DistributedSettings(strategy="fsdp")
    world = start_world("cpu", settings)
    for case in spec["cases"]:
        folder, out = Path(case["config"]), Path(case["out"])
        out.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(0)
        config = read_config(folder)
        # As training builds it: whole on rank 0, on the meta device on the others.
        model = empty_model(config) if builds_on_meta(world) else None
        on_meta = model is not None
        model = (build_policy(config) if model is None else model).train()
        units = len(model.fsdp_units())
        shard_model(model, world, settings, Precision())
        # SGD, as the one-process reference (Adam would turn float noise into full steps).
        trained = [p for p in model.parameters() if p.requires_grad]
        optimiser = torch.optim.SGD(trained, lr=case.get("lr", 0.05))
        batch = load_file(str(folder / "batch.safetensors"))
        losses = []
        for _ in range(2):
            torch.manual_seed(123)  # the same noise and times on every rank and in the reference
            loss, _ = model(batch)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(float(loss.item()))
        export_weights(out / "model.safetensors", model, world)
        (out / f"rank{world.rank}.json").write_text(
            json.dumps(
                {"losses": losses, "held": sharded_numel(model), "units": units, "meta": on_meta}
            )
        )
    world.close()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
