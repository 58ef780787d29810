"""A torch training run in progress: one optimisation step, a checkpoint, the policy to evaluate.

Built by `rlctl.adapters.training.backend`; serves the application's `TrainingSession` port.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import structlog
import torch
from torch import nn
from torch.optim import Optimizer

from rlctl.adapters.control.stop_signals import StopSignals
from rlctl.adapters.policies.base import PolicyModel
from rlctl.adapters.policies.checkpoint import save_pretrained
from rlctl.adapters.policies.dropout import DrawThreads
from rlctl.adapters.policies.loaded_policy import LoadedPolicy
from rlctl.adapters.training import state_files
from rlctl.adapters.training.checkpoints import write_checkpoint
from rlctl.adapters.training.distributed import World
from rlctl.adapters.training.ema import EmaModel
from rlctl.adapters.training.finite import diagnose, nonfinite_weights
from rlctl.adapters.training.layout import images_channels_last
from rlctl.adapters.training.lerobot_config import TRAIN_CONFIG_NAME
from rlctl.adapters.training.precision import Precision
from rlctl.application.ports.training import CheckpointRef, StepResult, TrainingDiverged
from rlctl.domain.processors import ProcessorPipeline
from rlctl.domain.run_layout import PRETRAINED_DIR, TRAINING_STATE_DIR, step_name

log = structlog.get_logger(__name__)


@attrs.define(kw_only=True)
class RunParts:
    """Everything a session holds, as the backend built it."""

    world: World
    model: PolicyModel
    trained: nn.Module  # the model, or its DistributedDataParallel wrapper
    preprocessor: ProcessorPipeline
    postprocessor: ProcessorPipeline
    optimizer: Optimizer
    scheduler: Any
    scaler: torch.amp.GradScaler
    precision: Precision
    ema: EmaModel | None
    # The threads the model's dropouts draw with (`cpu_kernels=auto`), stopped at `close`.
    draw_threads: DrawThreads | None
    batches: Iterator[dict[str, Any]]
    batch_size: int
    grad_clip_norm: float
    output_dir: Path
    total_steps: int
    data_seed: int
    # Image inputs handed to the model channels-last (see `layout`).
    channels_last_keys: list[str]
    # Writes pretrained_model/train_config.json (LeRobot's view of the run).
    train_config: Callable[[], dict[str, Any]]


class TorchTrainingSession:
    def __init__(self, parts: RunParts, start_step: int) -> None:
        self._p = parts
        self._steps = start_step
        self._clock = time.perf_counter
        self._signals = StopSignals().install()

    @property
    def is_main(self) -> bool:
        return self._p.world.is_main

    @property
    def steps_done(self) -> int:
        return self._steps

    @property
    def model(self) -> PolicyModel:
        return self._p.model

    def train_step(self) -> StepResult:
        self._signals.raise_pending()
        p = self._p
        started = self._clock()
        raw = next(p.batches)
        batch = p.preprocessor.process_batch(raw)
        if p.channels_last_keys:
            batch = images_channels_last(batch, p.channels_last_keys)
        fetched = self._clock()
        p.model.train()
        p.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            p.world.device.type, dtype=p.precision.dtype, enabled=p.precision.enabled
        ):
            loss, parts = p.trained(batch)
        p.scaler.scale(loss).backward()
        p.scaler.unscale_(p.optimizer)
        limit = p.grad_clip_norm if p.grad_clip_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(
            p.model.parameters(), limit, error_if_nonfinite=False
        )
        # One device sync for both figures (reporting them needs it anyway), before the update
        # is queued: a NaN or inf step is never applied.
        figures = torch.stack([loss.detach().float(), grad_norm.detach().float().to(loss.device)])
        figures = figures.tolist()
        loss_value, norm_value = float(figures[0]), float(figures[1])
        # Under an fp16 loss scaler, overflowing gradients with a finite loss are routine: the
        # scaler skips that update and lowers its scale.
        skipped = p.precision.scaled and math.isfinite(loss_value) and not math.isfinite(norm_value)
        if not math.isfinite(loss_value) or not (math.isfinite(norm_value) or skipped):
            nonfinite = diagnose(raw, batch, p.model)
            p.optimizer.zero_grad(set_to_none=True)
            return StepResult(
                loss=loss_value,
                grad_norm=norm_value,
                lr=float(p.optimizer.param_groups[0]["lr"]),
                samples=0,
                data_s=fetched - started,
                compute_s=self._clock() - fetched,
                parts=dict(parts),
                nonfinite=nonfinite,
            )
        with self._signals.update():
            p.scaler.step(p.optimizer)
            p.scaler.update()
            if p.scheduler is not None:
                p.scheduler.step()
            self._steps += 1
            if p.ema is not None:
                p.ema.update(p.model, self._steps)
        return StepResult(
            loss=loss_value,
            grad_norm=norm_value,
            lr=float(p.optimizer.param_groups[0]["lr"]),
            samples=p.batch_size * p.world.size,
            data_s=fetched - started,
            compute_s=self._clock() - fetched,
            parts=dict(parts),
            skipped=skipped,
        )

    # --- checkpoints ------------------------------------------------------------------------

    def save_checkpoint(self) -> CheckpointRef | None:
        p = self._p
        models = [p.model] if p.ema is None else [p.model, p.ema.model]
        bad = nonfinite_weights(models)
        if bad:
            raise TrainingDiverged(
                f"the weights are NaN or inf after step {self._steps} ({', '.join(bad[:3])}"
                f"{' …' if len(bad) > 3 else ''}): no checkpoint is written",
                where=str(p.output_dir),
                hint="lower the learning rate (--optimizer.lr) or set --grad_clip_norm; the "
                "last checkpoint written is kept",
            )
        with self._signals.saving():
            rng = self._rng_of_every_rank()
            ref = None
            if p.world.is_main:
                name = step_name(self._steps, p.total_steps)
                path = write_checkpoint(
                    p.output_dir, name, lambda staging: self._fill(staging, rng)
                )
                ref = CheckpointRef(str(path), self._steps)
                log.info("checkpoint saved", step=self._steps, path=str(path))
            p.world.barrier()
        return ref

    def _rng_of_every_rank(self) -> dict[str, torch.Tensor]:
        """Rank 0's python/numpy/torch states, plus the torch state of every other rank."""
        world = self._p.world
        states = state_files.rng_tensors()
        torch_states = world.gather_to_main(torch.get_rng_state())
        for rank, state in enumerate(torch_states[1:], start=1):
            states[f"torch_rng_state.rank{rank}"] = state
        if torch.cuda.is_available() and world.device.type == "cuda":
            cuda_states = world.gather_to_main(torch.cuda.get_rng_state())
            for rank, state in enumerate(cuda_states[1:], start=1):
                states[f"torch_cuda_rng_state.rank{rank}"] = state
        return states

    def _fill(self, staging: Path, rng: dict[str, torch.Tensor]) -> None:
        p = self._p
        deployed = p.ema.model if p.ema is not None else p.model
        pretrained = save_pretrained(
            staging / PRETRAINED_DIR, deployed, p.preprocessor, p.postprocessor
        )
        state_files.write_json(p.train_config(), pretrained / TRAIN_CONFIG_NAME)
        folder = staging / TRAINING_STATE_DIR
        folder.mkdir()
        state_files.save_optimizer(p.optimizer, folder)
        if p.scheduler is not None:
            state_files.save_scheduler(p.scheduler, folder)
        if p.precision.scaled:
            state_files.write_json(p.scaler.state_dict(), folder / state_files.GRAD_SCALER_STATE)
        if p.ema is not None:
            # pretrained_model holds the average; resuming needs the live weights too.
            state_files.save_tensors(p.model.state_dict(), folder / state_files.LIVE_MODEL)
        state_files.save_tensors(rng, folder / state_files.RNG_STATE)
        state_files.write_json(
            {
                "step": self._steps,
                "num_processes": p.world.size,
                "batch_size": p.batch_size,
                "data_seed": p.data_seed,
            },
            folder / state_files.TRAINING_STEP,
        )

    # --- evaluation -------------------------------------------------------------------------

    @contextmanager
    def evaluation_policy(self) -> Iterator[LoadedPolicy]:
        self._signals.raise_pending()
        p = self._p
        model = p.ema.model if p.ema is not None else p.model
        devices = [p.world.device.index or 0] if p.world.device.type == "cuda" else []
        py_state, np_state = random.getstate(), np.random.get_state()
        with torch.random.fork_rng(devices=devices):
            policy = LoadedPolicy(model, p.preprocessor, p.postprocessor)
            try:
                yield policy
            finally:
                policy.reset()
                random.setstate(py_state)
                np.random.set_state(np_state)
                p.model.train()

    def barrier(self) -> None:
        self._p.world.barrier()

    def close(self) -> None:
        self._signals.uninstall()
        # Dropping the loader's iterator stops its worker processes.
        self._p.batches = iter(())
        if self._p.draw_threads is not None:
            self._p.draw_threads.close()
        self._p.world.close()
