"""The optimiser and learning-rate schedule a run trains with: the policy's preset, then the
overrides of `--optimizer.*` / `--scheduler.*`.

Each policy config gives its preset (`optimizer_preset`, `scheduler_preset`: LeRobot 0.6.1's
`get_optimizer_preset` and `get_scheduler_preset`; the table is in `rlctl.domain.optimization`),
so a plugin's policy type brings its own with its config class. `--use_policy_training_preset=false`
starts from LeRobot's default `AdamConfig` (lr 1e-3) instead.
"""

from __future__ import annotations

from typing import Any

import attrs

from rlctl.domain.optimization import (
    COSINE_DECAY,
    DIFFUSER_NAMES,
    OPTIMIZERS,
    SCHEDULERS,
    XVLA_ADAMW,
    OptimizerSpec,
    SchedulerSpec,
)
from rlctl.domain.train_settings import TrainSettings

# The specs are the domain's; they are named here too for the adapters that build them.
__all__ = [
    "COSINE_DECAY",
    "DIFFUSER_NAMES",
    "OPTIMIZERS",
    "SCHEDULERS",
    "XVLA_ADAMW",
    "OptimizerSpec",
    "SchedulerSpec",
    "resolve_optimization",
]


def resolve_optimization(settings: TrainSettings) -> tuple[OptimizerSpec, SchedulerSpec | None]:
    """The optimiser and schedule a run uses: the preset (or LeRobot's defaults) plus overrides."""
    policy = settings.policy
    if settings.use_policy_training_preset:
        optimizer, scheduler = policy.optimizer_preset(), policy.scheduler_preset()
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
