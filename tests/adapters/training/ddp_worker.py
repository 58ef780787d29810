"""One rank of the DDP test: train a tiny MLP, then report what this rank saw as JSON.

Run by `python -m torch.distributed.run --standalone --nproc_per_node=2 ddp_worker.py DATASET
OUT STEPS [RESUME]`; writes OUT/rank<r>.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import torch
from dependency_injector import providers

from rlctl.adapters.memory.metrics import RecordingMetricsSink
from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.training.backend import TorchTrainingBackend
from rlctl.domain.policies import MLPConfig
from rlctl.domain.train_settings import DatasetSource, TrainSettings
from rlctl.entrypoints.container import build_container


class Backend(TorchTrainingBackend):
    """Keeps the session so the script can read the trained weights afterwards."""

    session = None

    def _start(self, plan, world):
        Backend.session = super()._start(plan, world)
        return Backend.session


def checksum(tensors) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main() -> None:
    dataset, out, steps = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    resume = sys.argv[4] if len(sys.argv) > 4 else None
    torch.set_num_threads(1)
    settings = TrainSettings(
        dataset=DatasetSource(root=dataset),
        policy=MLPConfig(chunk_size=5, n_action_steps=5, hidden_dims=(32, 32), dropout=0.1),
        output_dir=str(out),
        steps=steps,
        batch_size=4,
        num_workers=0,
        log_freq=1,
        save_freq=2,
        eval_freq=0,
        resume=resume,
    )
    sink = RecordingMetricsSink()
    container = build_container()
    container.training_backend.override(providers.Object(Backend()))
    container.progress.override(providers.Object(SilentProgress()))
    report = container.train_policy(metrics=sink)(settings)
    model = Backend.session.model
    normalizer = Backend.session._p.preprocessor[-1]
    stats = {k: {n: v.tolist() for n, v in per.items()} for k, per in normalizer.stats.items()}
    rank = int(os.environ["RANK"])
    (out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "start": report.start_step,
                "done": report.steps_done,
                "checkpoint": report.last_checkpoint.location if report.last_checkpoint else None,
                "weights": checksum(model.parameters()),
                "stats": hashlib.sha256(json.dumps(stats, sort_keys=True).encode()).hexdigest(),
                "records": [r.metrics for r in sink.records],
            }
        )
    )


if __name__ == "__main__":
    main()
