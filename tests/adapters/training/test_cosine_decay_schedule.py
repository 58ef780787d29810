"""LeRobot's `cosine_decay_with_warmup` (SmolVLA's, π0's and π0.5's schedule), step by step.

The reference formula below is LeRobot 0.6.1's `CosineDecayWithWarmupSchedulerConfig.build`,
transcribed; the opt-in test runs LeRobot's own class on the same settings.
"""

from __future__ import annotations

import json
import math
from itertools import pairwise

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from rlctl.adapters.training.optim import build_optimizer, build_scheduler, lr_lambda
from rlctl.domain.policies import SmolVLAConfig
from rlctl.domain.train_presets import (
    COSINE_DECAY,
    OptimizerSpec,
    SchedulerSpec,
    resolve_optimization,
)
from rlctl.domain.train_settings import OptimizerOverrides, TrainSettings


def reference(warmup: int, decay: int, peak: float, decay_lr: float, total: int, step: int):
    if total < decay:
        scale = total / decay
        warmup, decay = int(warmup * scale), total
    if step < warmup:
        if step <= 0:
            return 1 / (warmup + 1)
        frac = 1 - step / warmup
        return (1 / (warmup + 1) - 1) * frac + 1
    cosine = 0.5 * (1 + math.cos(math.pi * min(step, decay) / decay))
    alpha = decay_lr / peak
    return (1 - alpha) * cosine + alpha


def spec(warmup: int, decay: int, peak: float, decay_lr: float) -> SchedulerSpec:
    return SchedulerSpec(
        type=COSINE_DECAY,
        num_warmup_steps=warmup,
        num_decay_steps=decay,
        peak_lr=peak,
        decay_lr=decay_lr,
    )


@given(
    warmup=st.integers(0, 3_000),
    decay=st.integers(1, 40_000),
    total=st.integers(1, 60_000),
    peak=st.floats(1e-6, 1e-2),
    ratio=st.floats(0.0, 1.0),
    where=st.floats(0.0, 1.2),
)
def test_the_schedule_is_lerobots_at_every_step(warmup, decay, total, peak, ratio, where):
    schedule = lr_lambda(spec(warmup, decay, peak, peak * ratio), total)
    step = int(where * total)
    for s in (0, 1, step, step + 1, warmup, total - 1, total):
        assert schedule(s) == pytest.approx(
            reference(warmup, decay, peak, peak * ratio, total, s), rel=1e-12, abs=1e-15
        )


@given(
    warmup=st.integers(0, 500),
    decay=st.integers(1, 5_000),
    total=st.integers(1, 8_000),
    ratio=st.floats(0.0, 0.9),
)
def test_warm_up_climbs_to_the_peak_and_the_decay_ends_at_the_decay_lr(warmup, decay, total, ratio):
    assume(warmup < decay)
    schedule = lr_lambda(spec(warmup, decay, 1e-4, 1e-4 * ratio), total)
    values = [schedule(s) for s in range(total + 2)]
    # A run shorter than the decay squeezes both phases into its steps.
    end = min(decay, total)
    top = warmup if total >= decay else int(warmup * total / decay)
    assert max(values) <= 1.0 + 1e-12
    if top == 0:
        assert values[0] == pytest.approx(1.0)
    # Up during the warm-up, down from where it ends (LeRobot's cosine counts from step 0).
    assert all(b >= a - 1e-12 for a, b in pairwise(values[:top]))
    assert all(b <= a + 1e-12 for a, b in pairwise(values[top:]))
    assert values[end] == pytest.approx(ratio, abs=1e-9) and values[-1] == values[end]


def test_the_smolvla_preset_is_adamw_with_the_cosine_decay():
    optimizer, scheduler = resolve_optimization(TrainSettings(policy=SmolVLAConfig()))
    assert optimizer == OptimizerSpec(
        type="adamw", lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=1e-10, grad_clip_norm=10
    )
    assert scheduler == spec(1_000, 30_000, 1e-4, 2.5e-6)
    tuned = SmolVLAConfig(optimizer_lr=3e-4, scheduler_warmup_steps=10, scheduler_decay_steps=100)
    # --optimizer.lr changes the optimiser; the schedule's peak stays the policy's (as LeRobot).
    settings = TrainSettings(policy=tuned, optimizer=OptimizerOverrides(lr=5e-4))
    optimizer, scheduler = resolve_optimization(settings)
    assert optimizer.lr == 5e-4 and scheduler == spec(10, 100, 3e-4, 2.5e-6)


def test_the_optimiser_follows_the_schedule_over_a_short_run():
    net = torch.nn.Linear(2, 1)
    optimizer = build_optimizer(
        OptimizerSpec(type="adamw", lr=1e-3), [{"params": net.parameters()}]
    )
    # 20 steps of a 100-step decay: warm-up 10 -> 2 steps, decay over the 20.
    scheduler = build_scheduler(spec(10, 100, 1e-3, 1e-5), optimizer, 20)
    assert scheduler is not None
    lrs = []
    for _ in range(21):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[:2] == pytest.approx([1e-3 / 3, 2e-3 / 3])
    assert lrs == pytest.approx([1e-3 * reference(10, 100, 1e-3, 1e-5, 20, s) for s in range(21)])
    assert lrs[20] == pytest.approx(1e-5)


@pytest.mark.lerobot
def test_lerobots_own_scheduler_gives_the_same_rates(lerobot):
    cases = [(1_000, 30_000, 2.5e-5, 2.5e-6, 200), (100, 1_000, 1e-4, 2.5e-6, 5_000)]
    cases += [(0, 50, 1e-3, 0.0, 50), (7, 13, 1e-4, 1e-5, 9)]
    code = f"""
import json, torch
from lerobot.optim.schedulers import CosineDecayWithWarmupSchedulerConfig as C
out = []
for warmup, decay, peak, low, total in {cases!r}:
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    sched = C(num_warmup_steps=warmup, num_decay_steps=decay, peak_lr=peak, decay_lr=low)
    fn = sched.build(opt, total).lr_lambdas[0]
    out.append([fn(s) for s in range(total + 3)])
print(json.dumps(out))
"""
    theirs = lerobot("-c", code)
    for (warmup, decay, peak, low, total), rates in zip(cases, theirs):
        schedule = lr_lambda(spec(warmup, decay, peak, low), total)
        ours = [schedule(s) for s in range(total + 3)]
        assert ours == pytest.approx(rates, rel=1e-12, abs=1e-15), json.dumps([warmup, decay])
