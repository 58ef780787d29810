"""One rank of the sharded-training tests: train, then report what this rank saw as JSON.

`python -m torch.distributed.run --standalone --nproc_per_node=N sharded_worker.py SPEC` (or
plain `python sharded_worker.py SPEC` for one process), SPEC a JSON object: dataset, out,
steps, batch_size, and optionally strategy, accum, resume, save_freq, policy ("mlp", "act"),
pretrained (a pretrained_model folder to fine-tune).
Writes OUT/rank<r>.json: the losses logged each step, the parameters this rank holds, whether
it built its model on the meta device and the bytes of a weights file it read.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import attrs
import torch
from dependency_injector import providers

from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.training import run_setup, sharding
from rlctl.adapters.training.backend import TorchTrainingBackend
from rlctl.adapters.training.sharding import local, sharded_numel
from rlctl.domain.policies import ACTConfig, MLPConfig
from rlctl.domain.train_settings import DatasetSource, DistributedSettings, TrainSettings
from rlctl.entrypoints.container import build_container


class Recording:
    """A module's logger that also keeps what it logged at info, for this rank's report."""

    events: list[dict] = []

    def __init__(self, logger) -> None:
        self._logger = logger

    def __getattr__(self, name: str):
        return getattr(self._logger, name)

    def info(self, event: str, **fields) -> None:
        Recording.events.append({"event": event, **{k: str(v) for k, v in fields.items()}})
        self._logger.info(event, **fields)


run_setup.log = Recording(run_setup.log)
sharding.log = Recording(sharding.log)


class Backend(TorchTrainingBackend):
    """Keeps the session so the script can read the trained model afterwards."""

    session = None

    def _start(self, plan, world):
        Backend.session = super()._start(plan, world)
        return Backend.session


def policy(name: str):
    if name == "act":
        return ACTConfig(
            chunk_size=4, n_action_steps=4, dim_model=32, n_heads=2, dim_feedforward=64,
            n_encoder_layers=2, n_decoder_layers=1, latent_dim=8, n_vae_encoder_layers=1,
            dropout=0.0, pretrained_backbone_weights=None,
        )  # fmt: skip
    # One action per sample: no padded steps, so every rank's masked mean weighs alike.
    return MLPConfig(chunk_size=1, n_action_steps=1, hidden_dims=(32, 32), dropout=0.0)


def main() -> None:
    spec = json.loads(sys.argv[1])
    out = Path(spec["out"])
    torch.set_num_threads(1)
    config = policy(spec.get("policy", "mlp"))
    if spec.get("pretrained"):
        config = attrs.evolve(config, pretrained_path=spec["pretrained"])
    settings = TrainSettings(
        dataset=DatasetSource(root=spec["dataset"]),
        policy=config,
        output_dir=str(out),
        steps=spec["steps"],
        batch_size=spec["batch_size"],
        grad_accum_steps=spec.get("accum", 1),
        num_workers=0,
        log_freq=1,
        save_freq=spec.get("save_freq", spec["steps"]),
        eval_freq=0,
        resume=spec.get("resume"),
        cpu_kernels="torch",
        distributed=DistributedSettings(
            strategy=spec.get("strategy", "ddp"),
            shard_size=spec.get("shard_size"),
            activation_checkpointing=spec.get("activation_checkpointing", False),
        ),
    )
    sink = RecordingMetricsSink()
    container = build_container()
    container.training_backend.override(providers.Object(Backend()))
    container.progress.override(providers.Object(SilentProgress()))
    report = container.train_policy(metrics=sink)(settings)
    model = Backend.session.model
    optimizer = Backend.session._p.optimizer
    moments = [v for per in optimizer.state.values() for k, v in per.items() if k != "step"]
    rank = int(os.environ.get("RANK", "0"))
    (out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "start": report.start_step,
                "done": report.steps_done,
                "checkpoint": report.last_checkpoint.location if report.last_checkpoint else None,
                "losses": [r.metrics["loss"] for r in sink.records],
                "held": sharded_numel(model),
                "total": sum(p.numel() for p in model.parameters()),
                # Adam's two moments: the optimiser state this rank holds.
                "optimizer_held": sum(local(v).numel() for v in moments),
                # How this rank got its weights: built on the meta device, rows read.
                "built_on_meta": any(
                    e["event"] == "built on the meta device" for e in Recording.events
                ),
                "rows_read": [
                    int(e["bytes"])
                    for e in Recording.events
                    if e["event"] == "read this rank's rows of the weights"
                ],
            }
        )
    )


if __name__ == "__main__":
    main()
