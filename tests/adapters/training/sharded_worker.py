"""One rank of the sharded-training tests: train, then report what this rank saw as JSON.

`python -m torch.distributed.run --standalone --nproc_per_node=N sharded_worker.py SPEC` (or
plain `python sharded_worker.py SPEC` for one process), SPEC a JSON object: dataset, out,
steps, batch_size, and optionally strategy, accum, resume, save_freq, policy ("mlp", "act",
"pi0"), pretrained (a pretrained_model folder to fine-tune), tokenizer (π0's, a local folder).
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
from rlctl.domain.policies.pi0 import PI0Config
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

    probe: float | None = None

    def _start(self, plan, world):
        Backend.session = super()._start(plan, world)
        if isinstance(Backend.session.model.config, PI0Config):
            Backend.probe = probe_loss(Backend.session._p.model)
        return Backend.session


def probe_loss(model) -> float:
    """π0's loss on one fixed batch and noise, before any step: every rank computes the same
    (each gathers the whole layers), and a one-process model of the same weights too."""
    config = model.config
    generator = torch.Generator().manual_seed(7)
    batch = {
        key: torch.rand(2, *feature.shape, generator=generator)
        for key, feature in config.input_features.items()
    }
    batch["observation.language.tokens"] = torch.randint(0, 320, (2, 24), generator=generator)
    batch["observation.language.attention_mask"] = torch.ones(2, 24, dtype=torch.bool)
    batch["action"] = torch.randn(2, config.chunk_size, 6, generator=generator)
    torch.manual_seed(123)
    with torch.no_grad():
        loss, _ = model(batch)
    return float(loss)


PI0_VLM = (
    "custom:width=32,depth=1,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)
PI0_EXPERT = (
    "custom:width=16,depth=1,mlp_dim=32,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320"
)


def local_tokenizer(folder: str) -> None:
    """PaliGemma's tokenizer name read from a tiny local folder, as if from the Hub cache."""
    from rlctl.adapters.policies.vla import tokenizer

    load = tokenizer.load_tokenizer
    tokenizer.load_tokenizer = lambda name, **options: load(  # type: ignore[assignment]
        folder if name == tokenizer.PALIGEMMA_TOKENIZER else name, **options
    )


def policy(name: str):
    if name == "pi0":
        return PI0Config(
            paligemma_variant=PI0_VLM, action_expert_variant=PI0_EXPERT, chunk_size=4,
            n_action_steps=4, num_inference_steps=2, image_resolution=(28, 28),
            tokenizer_max_length=24,
        )  # fmt: skip
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
    if spec.get("tokenizer"):
        local_tokenizer(spec["tokenizer"])
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
                "probe": Backend.probe,
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
