"""A torch training run in progress: one optimisation step, a checkpoint, the policy to evaluate.

Built by `rlctl.adapters.training.backend`; serves the application's `TrainingSession` port.
"""

from __future__ import annotations

import math
import random
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
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
from rlctl.adapters.policies.checkpoint import save_pretrained, write_config
from rlctl.adapters.policies.dropout import DrawThreads
from rlctl.adapters.policies.errors import CheckpointError
from rlctl.adapters.policies.loaded_policy import LoadedPolicy
from rlctl.adapters.policies.processors import write_pipeline
from rlctl.adapters.training import state_files
from rlctl.adapters.training.checkpoints import (
    begin_checkpoint,
    commit_checkpoint,
    write_checkpoint,
)
from rlctl.adapters.training.distributed import World
from rlctl.adapters.training.ema import EmaModel
from rlctl.adapters.training.finite import diagnose, nonfinite_tensors, nonfinite_weights
from rlctl.adapters.training.layout import images_channels_last
from rlctl.adapters.training.lerobot_config import TRAIN_CONFIG_NAME
from rlctl.adapters.training.precision import Precision
from rlctl.adapters.training.sharded_checkpoint import DCP_DIR, export_weights, save_sharded
from rlctl.adapters.training.sharding import full, local
from rlctl.application.ports.training import CheckpointRef, StepResult, TrainingDiverged
from rlctl.domain.processors import ProcessorPipeline
from rlctl.domain.run_layout import MODEL_FILE, PRETRAINED_DIR, TRAINING_STATE_DIR, step_name

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
    # ddp (or one process), fsdp or hsdp: the sharded ones checkpoint through DCP.
    strategy: str = "ddp"
    # Micro-batches whose gradients add up to one optimisation step.
    grad_accum_steps: int = 1
    # What `batches` still need of the pre-processor, when they come partly processed (columns
    # normalised once: `column_batches`); None: all of it.
    batch_preprocessor: ProcessorPipeline | None = None

    @property
    def sharded(self) -> bool:
        return self.strategy in ("fsdp", "hsdp")


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
        p.model.train()
        p.optimizer.zero_grad(set_to_none=True)
        accum = p.grad_accum_steps
        losses: list[torch.Tensor] = []
        parts: dict[str, float] = {}
        data_s = 0.0
        preprocessor = p.preprocessor if p.batch_preprocessor is None else p.batch_preprocessor
        for micro in range(accum):
            before = self._clock()
            raw = next(p.batches)
            batch = preprocessor.process_batch(raw)
            if p.channels_last_keys:
                batch = images_channels_last(batch, p.channels_last_keys)
            data_s += self._clock() - before
            with self._gradient_sync(micro == accum - 1):
                with torch.autocast(
                    p.world.device.type, dtype=p.precision.dtype, enabled=p.precision.enabled
                ):
                    loss, micro_parts = p.trained(batch)
                # The mean over the micro-batches: the gradient of one batch accum times larger.
                p.scaler.scale(loss / accum if accum > 1 else loss).backward()
            losses.append(loss.detach().float())
            for key, value in micro_parts.items():
                parts[key] = parts.get(key, 0.0) + float(value) / accum
        p.scaler.unscale_(p.optimizer)
        limit = p.grad_clip_norm if p.grad_clip_norm > 0 else float("inf")
        grad_norm = full(
            torch.nn.utils.clip_grad_norm_(p.model.parameters(), limit, error_if_nonfinite=False)
        )
        mean_loss = losses[0] if accum == 1 else torch.stack(losses).mean()
        # One device sync for both figures (reporting them needs it anyway), before the update
        # is queued: a NaN or inf step is never applied. The loss is every rank's mean, so all
        # ranks report (and stop on) the same figure.
        figures = torch.stack([mean_loss, grad_norm.detach().float().to(mean_loss.device)])
        if p.world.distributed:
            figures[0] = p.world.mean(figures[0])
        figures_list = figures.tolist()
        loss_value, norm_value = float(figures_list[0]), float(figures_list[1])
        fetched = started + data_s
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
            p.model.after_optimizer_step()
            self._steps += 1
            if p.ema is not None:
                p.ema.update(p.model, self._steps)
        return StepResult(
            loss=loss_value,
            grad_norm=norm_value,
            lr=float(p.optimizer.param_groups[0]["lr"]),
            samples=p.batch_size * p.world.size * p.grad_accum_steps,
            data_s=fetched - started,
            compute_s=self._clock() - fetched,
            parts=dict(parts),
            skipped=skipped,
        )

    def _gradient_sync(self, last: bool) -> Any:
        """Gradients are averaged across ranks only after the last micro-batch of a step."""
        p = self._p
        if last or (not p.world.distributed and not p.sharded):
            return nullcontext()
        if p.sharded:
            return _fsdp_sync_off(p.model)
        return p.trained.no_sync()  # DistributedDataParallel

    # --- checkpoints ------------------------------------------------------------------------

    def save_checkpoint(self) -> CheckpointRef | None:
        p = self._p
        models = [p.model] if p.ema is None else [p.model, p.ema.model]
        bad = nonfinite_weights(models) if not p.sharded else self._nonfinite_shards()
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
            if p.sharded:
                return self._save_sharded(rng)
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

    def _nonfinite_shards(self) -> list[str]:
        """Every rank checks its own shards; all of them learn whether any found NaN or inf."""
        p = self._p
        mine = nonfinite_tensors((k, local(v)) for k, v in p.model.state_dict().items())
        if p.world.any(bool(mine)):
            return mine or ["on another rank's shard"]
        return []

    def _save_sharded(self, rng: dict[str, torch.Tensor]) -> CheckpointRef | None:
        """Every rank writes its shards (DCP, and its rows of model.safetensors) into the
        staging folder rank 0 made; rank 0 adds the rest and puts it in place."""
        p = self._p
        world = p.world
        name = step_name(self._steps, p.total_steps)
        made = str(begin_checkpoint(p.output_dir, name)) if world.is_main else None
        staging = Path(world.broadcast_json(made))
        failed: BaseException | None = None
        try:
            (staging / PRETRAINED_DIR).mkdir(exist_ok=True)
            (staging / TRAINING_STATE_DIR).mkdir(exist_ok=True)
            save_sharded(staging / TRAINING_STATE_DIR / DCP_DIR, p.model, p.optimizer)
            export_weights(staging / PRETRAINED_DIR / MODEL_FILE, p.model, world)
        except Exception as err:
            failed = err
        if world.any(failed is not None):
            if world.is_main:
                shutil.rmtree(staging, ignore_errors=True)
            raise CheckpointError(
                f"writing the sharded checkpoint failed: {failed or 'on another rank'}",
                where=str(staging),
                hint="check the free space and that every node writes to the same shared "
                "output dir; the previous checkpoint is kept",
            ) from failed
        ref = None
        if world.is_main:
            try:
                self._fill_sharded(staging, rng)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            path = commit_checkpoint(staging, name)
            ref = CheckpointRef(str(path), self._steps)
            log.info("checkpoint saved", step=self._steps, path=str(path), sharded=world.size)
        world.barrier()
        return ref

    def _fill_sharded(self, staging: Path, rng: dict[str, torch.Tensor]) -> None:
        p = self._p
        pretrained = staging / PRETRAINED_DIR
        write_config(p.model.config, pretrained)
        write_pipeline(p.preprocessor, pretrained)
        write_pipeline(p.postprocessor, pretrained)
        state_files.write_json(p.train_config(), pretrained / TRAIN_CONFIG_NAME)
        self._fill_state(staging / TRAINING_STATE_DIR, rng, optimizer=False)

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
        if p.ema is not None:
            # pretrained_model holds the average; resuming needs the live weights too.
            state_files.save_tensors(p.model.state_dict(), folder / state_files.LIVE_MODEL)
        self._fill_state(folder, rng, optimizer=True)

    def _fill_state(self, folder: Path, rng: dict[str, torch.Tensor], *, optimizer: bool) -> None:
        p = self._p
        if optimizer:
            state_files.save_optimizer(p.optimizer, folder)
        if p.scheduler is not None:
            state_files.save_scheduler(p.scheduler, folder)
        if p.precision.scaled:
            state_files.write_json(p.scaler.state_dict(), folder / state_files.GRAD_SCALER_STATE)
        state_files.save_tensors(rng, folder / state_files.RNG_STATE)
        state_files.write_json(
            {
                "step": self._steps,
                "num_processes": p.world.size,
                "batch_size": p.batch_size,
                "data_seed": p.data_seed,
                "grad_accum_steps": p.grad_accum_steps,
                "strategy": p.strategy,
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


@contextmanager
def _fsdp_sync_off(model: nn.Module) -> Iterator[None]:
    model.set_requires_gradient_sync(False)  # type: ignore[operator]
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)  # type: ignore[operator]
