"""Each policy's optimiser and learning-rate schedule, as LeRobot 0.6.1's `get_optimizer_preset`
and `get_scheduler_preset` give them, and how `--optimizer.*` / `--scheduler.*` override them.

    ACT        AdamW(lr=optimizer_lr, weight_decay=optimizer_weight_decay), no schedule; the
               ResNet's own lr (`optimizer_lr_backbone`) comes from the model's parameter groups
    Diffusion  Adam(lr, betas, eps, weight_decay from the config) + diffusers' cosine schedule
               with `scheduler_warmup_steps` of linear warm-up
    MLP        AdamW(lr=optimizer_lr, weight_decay=optimizer_weight_decay), no schedule
    SmolVLA,   AdamW(lr, betas, eps, weight_decay, grad_clip_norm from the config) + LeRobot's
    π0, π0.5   `cosine_decay_with_warmup` (`scheduler_warmup_steps`, `scheduler_decay_steps`,
               `scheduler_decay_lr`, peak at `optimizer_lr`): linear warm-up, then half a cosine
               from the peak down to the decay lr. A run shorter than the decay squeezes both
               phases into its steps (see `rlctl.adapters.training.optim`).

A new policy registers its preset with `@training_preset("name")`; a policy without one trains
with LeRobot's default `AdamConfig` (lr 1e-3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import attrs

from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import (
    ACTConfig,
    DiffusionConfig,
    MLPConfig,
    PolicyConfig,
    SmolVLAConfig,
)
from rlctl.domain.train_settings import TrainSettings

OPTIMIZERS = ("adam", "adamw", "sgd")
COSINE_DECAY = "cosine_decay_with_warmup"
SCHEDULERS = ("diffuser", "cosine_annealing_with_warmup", "constant_with_warmup", COSINE_DECAY)
DIFFUSER_NAMES = ("cosine", "linear", "constant", "constant_with_warmup")


@attrs.frozen(kw_only=True)
class OptimizerSpec:
    """A concrete optimiser: LeRobot's `{"type": "adamw", "lr": ..., "grad_clip_norm": ...}`."""

    type: str = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    momentum: float = 0.0
    grad_clip_norm: float = 10.0

    def __attrs_post_init__(self) -> None:
        if self.type not in OPTIMIZERS:
            raise ConfigError(
                f"unknown optimizer type {self.type!r}",
                where="optimizer.type",
                hint=f"choose one of: {', '.join(OPTIMIZERS)}",
            )
        if self.lr <= 0:
            raise ConfigError(
                f"the learning rate must be positive, got {self.lr}", where="optimizer.lr"
            )


@attrs.frozen(kw_only=True)
class SchedulerSpec:
    """A concrete schedule over `num_training_steps`: LeRobot's `{"type": "diffuser", ...}`."""

    type: str = "diffuser"
    name: str = "cosine"
    num_warmup_steps: int = 0
    # cosine_decay_with_warmup: the steps of the decay, the lr it reaches and the peak it
    # starts from (None: the optimiser's lr).
    num_decay_steps: int = 30_000
    decay_lr: float = 2.5e-6
    peak_lr: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.type not in SCHEDULERS:
            raise ConfigError(
                f"unknown scheduler type {self.type!r}",
                where="scheduler.type",
                hint=f"choose one of: {', '.join(SCHEDULERS)}, or none",
            )
        if self.type == "diffuser" and self.name not in DIFFUSER_NAMES:
            raise ConfigError(
                f"unknown diffuser schedule {self.name!r}",
                where="scheduler.name",
                hint=f"choose one of: {', '.join(DIFFUSER_NAMES)}",
            )
        if self.num_warmup_steps < 0:
            raise ConfigError(
                "num_warmup_steps cannot be negative", where="scheduler.num_warmup_steps"
            )
        if self.type == COSINE_DECAY:
            if self.num_decay_steps < 1:
                raise ConfigError(
                    f"the cosine decay needs at least one step, got {self.num_decay_steps}",
                    where="policy.scheduler_decay_steps",
                )
            if self.peak_lr is not None and self.peak_lr <= 0:
                raise ConfigError(
                    f"the peak learning rate must be positive, got {self.peak_lr}",
                    where="policy.optimizer_lr",
                )


Preset = Callable[[PolicyConfig], tuple[OptimizerSpec, SchedulerSpec | None]]
_PRESETS: dict[str, Preset] = {}


def training_preset(policy_type: str) -> Callable[[Preset], Preset]:
    def register(fn: Preset) -> Preset:
        _PRESETS[policy_type] = fn
        return fn

    return register


@training_preset("act")
def _act(config: PolicyConfig) -> tuple[OptimizerSpec, SchedulerSpec | None]:
    assert isinstance(config, ACTConfig)
    return (
        OptimizerSpec(
            type="adamw", lr=config.optimizer_lr, weight_decay=config.optimizer_weight_decay
        ),
        None,
    )


@training_preset("diffusion")
def _diffusion(config: PolicyConfig) -> tuple[OptimizerSpec, SchedulerSpec | None]:
    assert isinstance(config, DiffusionConfig)
    return (
        OptimizerSpec(
            type="adam",
            lr=config.optimizer_lr,
            betas=config.optimizer_betas,
            eps=config.optimizer_eps,
            weight_decay=config.optimizer_weight_decay,
        ),
        SchedulerSpec(
            type="diffuser",
            name=config.scheduler_name,
            num_warmup_steps=config.scheduler_warmup_steps,
        ),
    )


@training_preset("mlp")
def _mlp(config: PolicyConfig) -> tuple[OptimizerSpec, SchedulerSpec | None]:
    assert isinstance(config, MLPConfig)
    return (
        OptimizerSpec(
            type="adamw", lr=config.optimizer_lr, weight_decay=config.optimizer_weight_decay
        ),
        None,
    )


class CosineDecayFields(Protocol):
    """The config fields of the VLA presets (LeRobot's SmolVLA, π0 and π0.5 share them)."""

    @property
    def optimizer_lr(self) -> float: ...
    @property
    def optimizer_betas(self) -> tuple[float, float]: ...
    @property
    def optimizer_eps(self) -> float: ...
    @property
    def optimizer_weight_decay(self) -> float: ...
    @property
    def optimizer_grad_clip_norm(self) -> float: ...
    @property
    def scheduler_warmup_steps(self) -> int: ...
    @property
    def scheduler_decay_steps(self) -> int: ...
    @property
    def scheduler_decay_lr(self) -> float: ...


def adamw_cosine_decay_preset(config: PolicyConfig) -> tuple[OptimizerSpec, SchedulerSpec]:
    """LeRobot's `AdamWConfig` + `CosineDecayWithWarmupSchedulerConfig` from the config's
    `optimizer_*` and `scheduler_*` fields: SmolVLA's, π0's and π0.5's preset. Another policy
    with those fields registers it with `training_preset("name")(adamw_cosine_decay_preset)`."""
    fields = cast(CosineDecayFields, config)
    return (
        OptimizerSpec(
            type="adamw",
            lr=fields.optimizer_lr,
            betas=(float(fields.optimizer_betas[0]), float(fields.optimizer_betas[1])),
            eps=fields.optimizer_eps,
            weight_decay=fields.optimizer_weight_decay,
            grad_clip_norm=float(fields.optimizer_grad_clip_norm),
        ),
        SchedulerSpec(
            type=COSINE_DECAY,
            num_warmup_steps=fields.scheduler_warmup_steps,
            num_decay_steps=fields.scheduler_decay_steps,
            decay_lr=fields.scheduler_decay_lr,
            peak_lr=fields.optimizer_lr,
        ),
    )


@training_preset("smolvla")
def _smolvla(config: PolicyConfig) -> tuple[OptimizerSpec, SchedulerSpec | None]:
    assert isinstance(config, SmolVLAConfig)
    return adamw_cosine_decay_preset(config)


# π0 and π0.5 (their config classes live beside SmolVLA's) name the same fields.
training_preset("pi0")(adamw_cosine_decay_preset)
training_preset("pi05")(adamw_cosine_decay_preset)


def resolve_optimization(settings: TrainSettings) -> tuple[OptimizerSpec, SchedulerSpec | None]:
    """The optimiser and schedule a run uses: the preset (or LeRobot's defaults) plus overrides."""
    preset = _PRESETS.get(settings.policy.type_name)
    if settings.use_policy_training_preset and preset is not None:
        optimizer, scheduler = preset(settings.policy)
    else:
        optimizer, scheduler = OptimizerSpec(), None

    changes = _overrides(
        settings.optimizer,
        ("type", "lr", "weight_decay", "betas", "eps", "momentum", "grad_clip_norm"),
    )
    if settings.grad_clip_norm is not None:
        changes["grad_clip_norm"] = settings.grad_clip_norm
    optimizer = attrs.evolve(optimizer, **changes)

    sched = settings.scheduler
    if sched.type is not None and sched.type.lower() in ("none", "null", "constant"):
        return optimizer, None
    sched_changes = _overrides(sched, ("type", "name", "num_warmup_steps"))
    if sched_changes:
        scheduler = attrs.evolve(scheduler or SchedulerSpec(), **sched_changes)
    if scheduler is not None and scheduler.type == COSINE_DECAY and scheduler.peak_lr is None:
        scheduler = attrs.evolve(scheduler, peak_lr=optimizer.lr)
    return optimizer, scheduler


def _overrides(section: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The settings of an overrides section that are set (None means "the preset's")."""
    values = attrs.asdict(section, recurse=False)
    return {name: values[name] for name in names if values[name] is not None}
