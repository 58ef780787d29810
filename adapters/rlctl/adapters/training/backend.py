"""The torch training backend: builds a run (data, policy, optimiser, loader) or restores one.

Serves the application's `TrainingBackend` port: `join` starts (or joins) the process group and
picks the device; the application then hands a `TrainingPlan` to `TorchProcesses.start`. Set-up
follows `lerobot-train`: seed, dataset with the policy's windows, policy and processors
(`run_setup`), the plan's optimiser and scheduler, then — when resuming — optimiser, scheduler
and step from the checkpoint, and last the generator states, so that the next step draws what
the uninterrupted run would have drawn.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import structlog
import torch
from torch.nn.parallel import DistributedDataParallel

from rlctl.adapters.policies.base import PolicyModel
from rlctl.adapters.policies.checkpoint import load_weights, read_config
from rlctl.adapters.policies.cpu_kernels import use_cpu_kernels
from rlctl.adapters.policies.processors import PREPROCESSOR_NAME
from rlctl.adapters.training import state_files
from rlctl.adapters.training.allocator import keep_freed_memory
from rlctl.adapters.training.augmentations import ImageAugmentations
from rlctl.adapters.training.checkpoints import confined, find_checkpoint
from rlctl.adapters.training.column_batches import column_batches
from rlctl.adapters.training.data import make_loader, sample_positions, sample_probabilities
from rlctl.adapters.training.distributed import World, start_world
from rlctl.adapters.training.ema import EmaModel
from rlctl.adapters.training.finite import check_statistics
from rlctl.adapters.training.layout import match_optimizer_layout, to_channels_last
from rlctl.adapters.training.lerobot_config import lerobot_train_config
from rlctl.adapters.training.optim import build_optimizer, build_scheduler, fused_supported
from rlctl.adapters.training.precision import Precision, grad_scaler, precision_for
from rlctl.adapters.training.run_setup import PreparedRun, prepare_run
from rlctl.adapters.training.sampling import StepBatchSampler
from rlctl.adapters.training.session import RunParts, TorchTrainingSession
from rlctl.adapters.training.sharded_checkpoint import (
    DCP_DIR,
    is_sharded_checkpoint,
    load_full_optimizer,
    load_sharded,
)
from rlctl.adapters.training.sharding import shard_model, sharded_numel
from rlctl.application.ports.training import CheckpointRef, TrainingPlan
from rlctl.domain.config import unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import PolicyConfig, lerobot_config_data
from rlctl.domain.processors import ProcessorPipeline
from rlctl.domain.run_layout import PRETRAINED_DIR, TRAINING_STATE_DIR
from rlctl.domain.train_presets import OptimizerSpec, SchedulerSpec
from rlctl.domain.train_settings import TrainSettings

log = structlog.get_logger(__name__)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@attrs.define
class Optimisation:
    optimizer_spec: OptimizerSpec
    scheduler_spec: SchedulerSpec | None
    optimizer: torch.optim.Optimizer
    scheduler: Any
    precision: Precision
    scaler: torch.amp.GradScaler


class TorchTrainingBackend:
    def __init__(
        self,
        *,
        video_backend: str | None = None,
        fused_optimizer: bool = True,
        keep_freed_memory: bool = False,
        in_memory_batches: bool = True,
    ) -> None:
        self.video_backend = None if video_backend in (None, "auto") else video_backend
        self.fused_optimizer = fused_optimizer
        # CPU runs with `cpu_kernels=auto` may keep freed memory for the next step
        # (`allocator`): a process-wide setting, so only a command that owns its process
        # (`rlctl train`) turns it on, never a service embedding training.
        self.keep_freed_memory = keep_freed_memory
        # Numbers-only datasets batched from memory (`column_batches`), normalised once; off:
        # every dataset through the DataLoader, its batches normalised step by step.
        self.in_memory_batches = in_memory_batches

    def find_checkpoint(self, location: str) -> CheckpointRef | None:
        return find_checkpoint(location)

    def checkpoint_policy(self, checkpoint: CheckpointRef) -> PolicyConfig:
        folder = Path(checkpoint.location)
        confined(folder)
        return read_config(folder / PRETRAINED_DIR)

    def join(self, settings: TrainSettings) -> TorchProcesses:
        world = start_world(settings.policy.device, settings.distributed)
        if self.keep_freed_memory and settings.cpu_kernels == "auto" and world.device.type == "cpu":
            keep_freed_memory()
        return TorchProcesses(self, world)

    def _start(self, plan: TrainingPlan, world: World) -> TorchTrainingSession:
        settings = plan.settings
        checkpoint = Path(plan.resume.location) if plan.resume is not None else None
        if checkpoint is not None:
            confined(checkpoint)
        step_info = (
            state_files.read_state_json(checkpoint / TRAINING_STATE_DIR / state_files.TRAINING_STEP)
            if checkpoint is not None
            else {}
        )
        data_seed = _data_seed(settings, step_info, world)
        if settings.seed is not None:
            # Each rank its own stream (dropout, noise); DDP copies rank 0's initial weights.
            seed_everything(settings.seed + world.rank)
        run = prepare_run(plan, world, video_backend=self.video_backend)
        if settings.seed is not None and (not world.is_main or not run.weights.first_rank):
            # Ranks after the first take their weights from it (a sharded run's build theirs
            # on the meta device, drawing nothing), as every rank of a sharded run whose
            # weights are read: their streams start after the build alike.
            seed_everything(settings.seed + world.rank)
        _check_statistics(run, checkpoint)
        settings = run.settings
        model = run.policy.model.train()
        sharded = world.mesh is not None
        strategy = settings.distributed.strategy if world.distributed or sharded else "ddp"
        _check_sharded(settings, sharded)
        ema = EmaModel(model, settings.ema) if settings.ema.enable else None
        if checkpoint is not None and ema is not None:
            # pretrained_model holds the average; the live weights are in training_state.
            load_weights(model, checkpoint / TRAINING_STATE_DIR / state_files.LIVE_MODEL)
        # The CPU kernels swap module classes, as FSDP does: sharded runs use torch's own.
        draw_threads = None if sharded else use_cpu_kernels(model, settings.cpu_kernels)
        # FSDP shards contiguous parameters only: channels-last convolutions are not.
        channels_last = False if sharded else to_channels_last(model)
        if ema is not None and channels_last:
            to_channels_last(ema.model)
        precision = precision_for(settings.amp_requested, world.device)
        if sharded:
            shard_model(model, world, settings.distributed, precision, run.weights)
        elif settings.distributed.activation_checkpointing:
            model.enable_activation_checkpointing()
        optimisation = self._optimisation(plan, settings, model, world, precision)
        start_step = 0
        if checkpoint is not None:
            start_step = _restore(checkpoint, optimisation, world, model)
        batches, batch_preprocessor = _batches(
            run, settings, world, data_seed, start_step, in_memory=self.in_memory_batches
        )
        _describe(run, model, world, optimisation, start_step)
        parts = RunParts(
            world=world,
            model=model,
            trained=model if sharded else _distributed(model, world),
            preprocessor=run.policy.preprocessor,
            postprocessor=run.policy.postprocessor,
            optimizer=optimisation.optimizer,
            scheduler=optimisation.scheduler,
            scaler=optimisation.scaler,
            precision=optimisation.precision,
            ema=ema,
            draw_threads=draw_threads,
            batches=batches,
            batch_size=settings.batch_size,
            grad_clip_norm=optimisation.optimizer_spec.grad_clip_norm,
            output_dir=Path(settings.output_dir or "."),
            total_steps=settings.steps,
            data_seed=data_seed,
            channels_last_keys=list(settings.policy.image_features) if channels_last else [],
            train_config=lambda: lerobot_train_config(
                settings,
                policy=lerobot_config_data(model.config),
                dataset_root=run.data.root,
                optimizer=optimisation.optimizer_spec,
                scheduler=optimisation.scheduler_spec,
                video_backend=self.video_backend,
                # The command's settings carry the simulator evaluated in (`--env.type`).
                env=getattr(settings, "env", None),
            ),
            strategy=strategy,
            grad_accum_steps=settings.grad_accum_steps,
            batch_preprocessor=batch_preprocessor,
        )
        return TorchTrainingSession(parts, start_step)

    def _optimisation(
        self,
        plan: TrainingPlan,
        settings: TrainSettings,
        model: PolicyModel,
        world: World,
        precision: Precision,
    ) -> Optimisation:
        optimizer_spec, scheduler_spec = plan.optimizer, plan.scheduler
        fused = self.fused_optimizer and fused_supported(world.device)
        optimizer = build_optimizer(optimizer_spec, model.parameter_groups(), fused=fused)
        return Optimisation(
            optimizer_spec,
            scheduler_spec,
            optimizer,
            build_scheduler(scheduler_spec, optimizer, settings.steps),
            precision,
            grad_scaler(precision, world.device),
        )


class TorchProcesses:
    """The processes of a torch run (`TrainingProcesses`): one, or a torchrun group."""

    def __init__(self, backend: TorchTrainingBackend, world: World) -> None:
        self._backend = backend
        self.world = world

    @property
    def is_main(self) -> bool:
        return self.world.is_main

    @property
    def distributed(self) -> bool:
        return self.world.distributed

    @property
    def device_type(self) -> str:
        return str(self.world.device.type)

    def barrier(self) -> None:
        self.world.barrier()

    def share(self, value: Any) -> Any:
        return self.world.broadcast_json(value)

    def start(self, plan: TrainingPlan) -> TorchTrainingSession:
        return self._backend._start(plan, self.world)

    def close(self) -> None:
        self.world.close()


def _batches(
    run: PreparedRun,
    settings: TrainSettings,
    world: World,
    data_seed: int,
    start_step: int,
    *,
    in_memory: bool,
) -> tuple[Iterator[dict[str, Any]], ProcessorPipeline | None]:
    """The run's batches, and the pre-processing they still need when not all of it (None)."""
    augment = ImageAugmentations(settings.dataset.image_transforms)
    pin_memory = world.device.type == "cuda"
    if run.data.streaming:
        from rlctl.adapters.storage.streaming.dataset import StreamingLeRobotDataset
        from rlctl.adapters.storage.streaming.mixture import StreamingMixture
        from rlctl.adapters.training.streaming_data import stream_batches

        assert isinstance(run.data.dataset, StreamingLeRobotDataset | StreamingMixture)
        streamed = stream_batches(
            run.data.dataset,
            augment,
            batch_size=settings.batch_size,
            num_workers=settings.num_workers,
            pin_memory=pin_memory,
            seed=data_seed,
            start_epoch=start_step * settings.grad_accum_steps,
        )
        return streamed, None
    positions = sample_positions(run.data, settings.policy)
    sampler = StepBatchSampler(
        positions,
        probabilities=sample_probabilities(run.data, positions, settings.dataset.weights),
        batch_size=settings.batch_size,
        seed=data_seed,
        # Each micro-batch is a sampler step: an accumulated step reads the samples of one
        # batch grad_accum_steps times larger.
        start_step=start_step * settings.grad_accum_steps,
        rank=world.rank,
        world_size=world.size,
        sample_seeds=augment.enabled and bool(run.data.camera_keys),
    )
    if in_memory:
        found = column_batches(run.data.dataset, sampler, run.policy.preprocessor)
        if found is not None:
            return found
    loader = make_loader(
        run.data,
        sampler,
        augment,
        num_workers=settings.num_workers,
        pin_memory=pin_memory,
        seed=data_seed,
    )
    return iter(loader), None


def _check_statistics(run: PreparedRun, checkpoint: Path | None) -> None:
    """Refuse, before the first step, statistics that would make every normalised value NaN."""
    pipelines = (run.policy.preprocessor, run.policy.postprocessor)
    if checkpoint is not None:
        where = str(checkpoint / PRETRAINED_DIR / f"{PREPROCESSOR_NAME}.json")
        hint = (
            "the checkpoint's normalisation statistics are damaged: resume from another "
            "checkpoints/<step> folder, or start a new run"
        )
    else:
        where = str(run.data.root / "meta" / "stats.json")
        hint = (
            f"recompute them with `rlctl dataset recompute-stats {run.data.root}`; "
            f"`rlctl dataset check {run.data.root}` finds rows holding NaN or inf"
        )
    names = {key: spec.names for key, spec in run.data.meta.features.items()}
    check_statistics(pipelines, where=where, hint=hint, names=names)


def _restore(checkpoint: Path, optimisation: Optimisation, world: World, model: PolicyModel) -> int:
    folder = checkpoint / TRAINING_STATE_DIR
    if is_sharded_checkpoint(checkpoint):
        # Model and optimiser, resharded to this run (the pretrained_model weights it was
        # built from are the same numbers).
        load_sharded(folder / DCP_DIR, model, optimisation.optimizer)
    elif world.mesh is not None:
        load_full_optimizer(model, optimisation.optimizer, folder)
    else:
        state_files.load_optimizer(optimisation.optimizer, folder)
        match_optimizer_layout(optimisation.optimizer)
    if optimisation.scheduler is not None:
        state_files.load_scheduler(optimisation.scheduler, folder)
    scaler_file = folder / state_files.GRAD_SCALER_STATE
    if optimisation.scaler.is_enabled() and scaler_file.is_file():
        optimisation.scaler.load_state_dict(state_files.read_state_json(scaler_file))
    # Last, so that nothing built after it draws from the restored streams.
    state_files.restore_rng(state_files.read_tensors(folder / state_files.RNG_STATE), world.rank)
    return int(state_files.read_state_json(folder / state_files.TRAINING_STEP)["step"])


def _distributed(model: PolicyModel, world: World) -> torch.nn.Module:
    if not world.distributed:
        return model
    return DistributedDataParallel(
        model,
        device_ids=[world.device.index] if world.device.type == "cuda" else None,
        # As LeRobot: some policies leave parameters unused in some steps.
        find_unused_parameters=True,
    )


def _check_sharded(settings: TrainSettings, sharded: bool) -> None:
    if not sharded:
        return
    strategy = settings.distributed.strategy
    if settings.ema.enable:
        raise ConfigError(
            f"an EMA of the weights is not kept under --distributed.strategy={strategy}",
            where="ema.enable",
            hint="train with --distributed.strategy=ddp to keep an EMA, or drop --ema.enable",
        )
    if settings.eval_freq > 0 and getattr(settings, "env", None) is not None:
        raise ConfigError(
            f"evaluation in the simulator during training runs on one rank, which cannot run a "
            f"model sharded over all of them (--distributed.strategy={strategy})",
            where="eval_freq",
            hint="pass --eval_freq=0 and evaluate the checkpoints with `rlctl eval "
            "--policy.path=OUTPUT/checkpoints/STEP/pretrained_model`, or train with ddp",
        )


def _data_seed(settings: TrainSettings, step_info: dict[str, Any], world: World) -> int:
    """The seed of the sample order: the checkpoint's, the run's, or (unseeded) rank 0's draw."""
    if step_info.get("data_seed") is not None:
        return int(step_info["data_seed"])
    if settings.seed is not None:
        return settings.seed
    return int(world.broadcast_json(secrets.randbits(31)))


def _describe(
    run: PreparedRun, model: PolicyModel, world: World, optimisation: Optimisation, start: int
) -> None:
    if not world.is_main:
        return
    settings = run.settings
    log.info(
        "training",
        policy=settings.policy.type_name,
        dataset=str(run.data.root),
        frames=run.data.num_frames,
        streaming=run.data.streaming,
        episodes=run.data.dataset.num_episodes,
        parameters=sum(p.numel() for p in model.parameters()),
        device=str(world.device),
        processes=world.size,
        batch_size=f"{settings.batch_size} x {world.size}"
        + (f" x {settings.grad_accum_steps} accumulated" if settings.grad_accum_steps > 1 else ""),
        strategy=settings.distributed.strategy
        if world.distributed or world.mesh is not None
        else "single",
        parameters_per_rank=sharded_numel(model),
        optimizer=unstructure(optimisation.optimizer_spec),
        scheduler=unstructure(optimisation.scheduler_spec) if optimisation.scheduler_spec else None,
        precision=str(optimisation.precision.dtype).removeprefix("torch."),
        cpu_kernels=settings.cpu_kernels,
        start_step=start,
        steps=settings.steps,
    )
