"""What a training run optimises with: the optimiser and the learning-rate schedule, as data.

`OptimizerSpec` and `SchedulerSpec` are LeRobot's `{"type": "adamw", "lr": ...}` and
`{"type": "diffuser", ...}` sections; the torch adapters build them. Each policy config gives its
own (`PolicyConfig.optimizer_preset` and `scheduler_preset`, LeRobot's `get_optimizer_preset` and
`get_scheduler_preset`); `rlctl.domain.train_presets.resolve_optimization` applies
`--optimizer.*` / `--scheduler.*` on top.

    ACT        AdamW(lr=optimizer_lr, weight_decay=optimizer_weight_decay), no schedule; the
               ResNet's own lr (`optimizer_lr_backbone`) comes from the model's parameter groups
    Diffusion  Adam(lr, betas, eps, weight_decay from the config) + diffusers' cosine schedule
               with `scheduler_warmup_steps` of linear warm-up
    MLP        AdamW(lr=optimizer_lr, weight_decay=optimizer_weight_decay), no schedule
    VQ-BeT     Adam(lr, betas, eps, weight_decay) + LeRobot's `vqbet` schedule: the full lr for
               the `n_vqvae_training_steps` of the quantiser, then warm-up and half a cosine
    TD-MPC     Adam(lr=optimizer_lr), no schedule
    SmolVLA,   AdamW(lr, betas, eps, weight_decay, grad_clip_norm from the config) + LeRobot's
    π0, π0.5   `cosine_decay_with_warmup` (`scheduler_warmup_steps`, `scheduler_decay_steps`,
               `scheduler_decay_lr`, peak at `optimizer_lr`): linear warm-up, then half a cosine
               from the peak down to the decay lr. A run shorter than the decay squeezes both
               phases into its steps (the torch adapters' schedule does).

A policy that gives none trains with LeRobot's default `AdamConfig` (lr 1e-3), no schedule.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from rlctl.domain.errors import ConfigError

# "xvla-adamw": LeRobot's AdamW for X-VLA, its groups named by the model ("vlm" at a tenth of
# the lr and weight decay, "soft_prompts" at `soft_prompt_lr_scale`, "other" at the lr).
XVLA_ADAMW = "xvla-adamw"
OPTIMIZERS = ("adam", "adamw", "sgd", XVLA_ADAMW)
COSINE_DECAY = "cosine_decay_with_warmup"
# VQ-BeT's: a constant lr while its action quantiser trains, then a cosine with warm-up.
VQBET = "vqbet"
SCHEDULERS = (
    "diffuser",
    "cosine_annealing_with_warmup",
    "constant_with_warmup",
    COSINE_DECAY,
    VQBET,
)
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
    # xvla-adamw: the soft prompts' lr as a share of `lr`; with a warm-up scale they start at
    # that share instead (the schedule warms them up), LeRobot's XVLAAdamWConfig fields.
    soft_prompt_lr_scale: float = 1.0
    soft_prompt_warmup_lr_scale: float | None = None

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
        for name in ("soft_prompt_lr_scale", "soft_prompt_warmup_lr_scale"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(
                    f"{name} must be positive, got {value}", where=f"optimizer.{name}"
                )

    def group_lr_scales(self) -> dict[str, tuple[float, float]]:
        """(lr, weight decay) multipliers of the groups the optimiser names (xvla-adamw's);
        a group whose name is not here trains at the spec's own values."""
        if self.type != XVLA_ADAMW:
            return {}
        prompts = self.soft_prompt_warmup_lr_scale or self.soft_prompt_lr_scale
        return {"vlm": (0.1, 0.1), "soft_prompts": (prompts, 1.0), "other": (1.0, 1.0)}


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
    # vqbet: the steps of the first phase (the residual VQ), at the full lr.
    num_vqvae_training_steps: int = 0

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


def cosine_decay_optimizer(fields: CosineDecayFields) -> OptimizerSpec:
    """LeRobot's `AdamWConfig` from the config's `optimizer_*` fields (SmolVLA, π0, π0.5)."""
    return OptimizerSpec(
        type="adamw",
        lr=fields.optimizer_lr,
        betas=(float(fields.optimizer_betas[0]), float(fields.optimizer_betas[1])),
        eps=fields.optimizer_eps,
        weight_decay=fields.optimizer_weight_decay,
        grad_clip_norm=float(fields.optimizer_grad_clip_norm),
    )


def cosine_decay_scheduler(fields: CosineDecayFields) -> SchedulerSpec:
    """LeRobot's `CosineDecayWithWarmupSchedulerConfig` from the `scheduler_*` fields, peaking
    at `optimizer_lr`."""
    return SchedulerSpec(
        type=COSINE_DECAY,
        num_warmup_steps=fields.scheduler_warmup_steps,
        num_decay_steps=fields.scheduler_decay_steps,
        decay_lr=fields.scheduler_decay_lr,
        peak_lr=fields.optimizer_lr,
    )
