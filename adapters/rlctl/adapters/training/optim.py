"""Optimisers and learning-rate schedules from their specs, as LeRobot 0.6.1 builds them.

The schedules are the formulas of diffusers' `get_scheduler` (which LeRobot's "diffuser"
scheduler calls) and of LeRobot's own warm-up schedulers, written out so that training needs
neither diffusers nor LeRobot.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import structlog
import torch
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from rlctl.domain.optimization import VQBET
from rlctl.domain.train_presets import COSINE_DECAY, OptimizerSpec, SchedulerSpec

log = structlog.get_logger(__name__)

LrLambda = Callable[[int], float]


def build_optimizer(
    spec: OptimizerSpec, param_groups: list[dict[str, Any]], *, fused: bool = False
) -> Optimizer:
    """`param_groups` come from the model (ACT gives its backbone its own lr); the spec's values
    are the defaults every group without its own inherits."""
    groups = [g for g in param_groups if g["params"]]
    scales = spec.group_lr_scales()
    if scales:  # LeRobot's order of keys: params, lr, weight_decay, name
        groups = [
            {
                "params": g["params"],
                "lr": spec.lr * scales.get(g.get("name", ""), (1.0, 1.0))[0],
                "weight_decay": spec.weight_decay * scales.get(g.get("name", ""), (1.0, 1.0))[1],
                **{k: v for k, v in g.items() if k not in ("params", "lr", "weight_decay")},
            }
            for g in groups
        ]
    if spec.type == "sgd":
        return torch.optim.SGD(
            groups, lr=spec.lr, momentum=spec.momentum, weight_decay=spec.weight_decay
        )
    cls = torch.optim.Adam if spec.type == "adam" else torch.optim.AdamW
    # `fused` computes the update in one kernel per dtype: much faster on CPU than the
    # per-parameter loop, identical in arithmetic up to rounding.
    extra = {"fused": True} if fused else {}
    return cls(
        groups, lr=spec.lr, betas=spec.betas, eps=spec.eps, weight_decay=spec.weight_decay, **extra
    )


def _warmup(step: int, warmup: int) -> float:
    return step / max(1, warmup)


def cosine_decay_phases(spec: SchedulerSpec, total_steps: int) -> tuple[int, int]:
    """(warm-up steps, decay steps) of LeRobot's `cosine_decay_with_warmup`: a run shorter than
    `num_decay_steps` scales both so that the schedule ends with the run."""
    warmup, decay = spec.num_warmup_steps, spec.num_decay_steps
    if total_steps < decay:
        scale = total_steps / decay
        warmup, decay = int(warmup * scale), total_steps
    return warmup, decay


def cosine_decay_with_warmup(spec: SchedulerSpec, total_steps: int) -> LrLambda:
    """Physical Intelligence's schedule (openpi's `CosineDecaySchedule`) as LeRobot 0.6.1 writes
    it: from 1/(warmup+1) of the peak linearly up to the peak, then half a cosine from the peak
    down to `decay_lr`, which it keeps."""
    warmup, decay = cosine_decay_phases(spec, total_steps)
    peak = spec.peak_lr
    if peak is None:
        raise ValueError("cosine_decay_with_warmup needs its peak_lr (the optimiser's lr)")
    alpha = spec.decay_lr / peak
    # A run of no steps has nothing to decay over; any positive span gives the same (unused) lr.
    span = max(1, decay)

    def schedule(step: int) -> float:
        if step < warmup:
            start = 1 / (warmup + 1)
            if step <= 0:
                return start
            return (start - 1) * (1 - step / warmup) + 1
        cosine = 0.5 * (1 + math.cos(math.pi * min(step, span) / span))
        return (1 - alpha) * cosine + alpha

    return schedule


def vqbet_schedule(spec: SchedulerSpec, total_steps: int) -> LrLambda:
    """LeRobot's `VQBeTSchedulerConfig`: 1 while the residual VQ trains, then a linear warm-up
    and half a cosine. Its progress divides by `total_steps - warmup` (not minus the VQ phase),
    so the cosine does not reach 0 by the end of the run: LeRobot's arithmetic, kept."""
    vq_steps, warmup = spec.num_vqvae_training_steps, spec.num_warmup_steps

    def schedule(step: int) -> float:
        if step < vq_steps:
            return 1.0
        adjusted = step - vq_steps
        if adjusted < warmup:
            return _warmup(adjusted, warmup)
        progress = (adjusted - warmup) / max(1, total_steps - warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))

    return schedule


def lr_lambda(spec: SchedulerSpec, total_steps: int) -> LrLambda:
    if spec.type == COSINE_DECAY:
        return cosine_decay_with_warmup(spec, total_steps)
    if spec.type == VQBET:
        return vqbet_schedule(spec, total_steps)
    warmup = spec.num_warmup_steps
    kind = spec.name if spec.type == "diffuser" else spec.type

    def cosine(step: int) -> float:
        if step < warmup:
            return _warmup(step, warmup)
        progress = (step - warmup) / max(1, total_steps - warmup)
        # diffusers' num_cycles=0.5: half a cosine from 1 to 0.
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    def linear(step: int) -> float:
        if step < warmup:
            return _warmup(step, warmup)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    def constant_with_warmup(step: int) -> float:
        return _warmup(step, warmup) if step < warmup else 1.0

    table: dict[str, LrLambda] = {
        "cosine": cosine,
        "cosine_annealing_with_warmup": cosine,
        "linear": linear,
        "constant": lambda step: 1.0,
        "constant_with_warmup": constant_with_warmup,
    }
    return table[kind]


def build_scheduler(
    spec: SchedulerSpec | None, optimizer: Optimizer, total_steps: int
) -> LambdaLR | None:
    if spec is None:
        return None
    if spec.type == COSINE_DECAY and total_steps < spec.num_decay_steps:
        warmup, decay = cosine_decay_phases(spec, total_steps)
        log.info(
            "lr schedule scaled to the run",
            steps=total_steps,
            warmup=f"{spec.num_warmup_steps} -> {warmup}",
            decay=f"{spec.num_decay_steps} -> {decay}",
        )
    return LambdaLR(optimizer, lr_lambda(spec, total_steps))


def fused_supported(device: torch.device) -> bool:
    # Fused Adam(W) runs on CPU and CUDA in torch >= 2.4.
    return device.type in ("cpu", "cuda")
