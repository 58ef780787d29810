"""Optimisers and schedules from their specs, and training state that round-trips exactly."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from rlctl.adapters.training import state_files
from rlctl.adapters.training.ema import EmaModel, ema_decay
from rlctl.adapters.training.optim import build_optimizer, build_scheduler, lr_lambda
from rlctl.domain.train_presets import OptimizerSpec, SchedulerSpec
from rlctl.domain.train_settings import EmaSettings


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def step(net: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler=None) -> None:
    optimizer.zero_grad()
    net(torch.ones(3, 4)).square().sum().backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()


def test_diffusers_cosine_with_warmup():
    f = lr_lambda(SchedulerSpec(type="diffuser", name="cosine", num_warmup_steps=10), 110)
    assert [f(0), f(5), f(10)] == [0.0, 0.5, 1.0]
    assert f(60) == pytest.approx(0.5) and f(110) == pytest.approx(0.0)
    linear = lr_lambda(SchedulerSpec(type="diffuser", name="linear", num_warmup_steps=0), 10)
    assert [linear(0), linear(5), linear(10)] == [1.0, 0.5, 0.0]
    flat = lr_lambda(SchedulerSpec(type="constant_with_warmup", num_warmup_steps=4), 10)
    assert [flat(2), flat(4), flat(9)] == [0.5, 1.0, 1.0]


def test_param_groups_keep_their_own_lr():
    net = model()
    groups = [
        {"params": list(net[0].parameters())},
        {"params": list(net[2].parameters()), "lr": 1e-5},
    ]
    optimizer = build_optimizer(OptimizerSpec(type="adamw", lr=1e-3, weight_decay=0.1), groups)
    assert isinstance(optimizer, torch.optim.AdamW)
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3, 1e-5]
    assert optimizer.param_groups[0]["weight_decay"] == 0.1


@pytest.mark.parametrize("kind", ["adam", "adamw", "sgd"])
def test_optimizer_and_scheduler_state_round_trip(tmp_path, kind):
    spec = OptimizerSpec(type=kind, lr=1e-2, momentum=0.9)
    sched = SchedulerSpec(type="diffuser", name="cosine", num_warmup_steps=2)
    net = model()
    optimizer = build_optimizer(spec, [{"params": list(net.parameters())}])
    scheduler = build_scheduler(sched, optimizer, 20)
    for _ in range(3):
        step(net, optimizer, scheduler)
    state_files.save_optimizer(optimizer, tmp_path)
    state_files.save_scheduler(scheduler, tmp_path)
    json.loads((tmp_path / state_files.OPTIMIZER_PARAM_GROUPS).read_text())  # plain JSON

    twin = model()
    twin.load_state_dict(net.state_dict())
    optimizer2 = build_optimizer(spec, [{"params": list(twin.parameters())}])
    scheduler2 = build_scheduler(sched, optimizer2, 20)
    state_files.load_optimizer(optimizer2, tmp_path)
    state_files.load_scheduler(scheduler2, tmp_path)
    step(net, optimizer, scheduler)
    step(twin, optimizer2, scheduler2)
    for a, b in zip(net.parameters(), twin.parameters()):
        assert torch.equal(a, b)
    assert optimizer2.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]


def test_rng_states_round_trip(tmp_path):
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    random.gauss(0, 1)  # leaves a cached gaussian in python's state
    state_files.save_tensors(state_files.rng_tensors(), tmp_path / state_files.RNG_STATE)
    expected = (random.random(), random.gauss(0, 1), np.random.rand(), torch.rand(3))
    torch.manual_seed(2)
    random.seed(2)
    np.random.seed(2)
    state_files.restore_rng(load_file(str(tmp_path / state_files.RNG_STATE)))
    got = (random.random(), random.gauss(0, 1), np.random.rand(), torch.rand(3))
    assert got[:3] == expected[:3] and torch.equal(got[3], expected[3])


def test_a_rank_restores_its_own_torch_stream():
    torch.manual_seed(5)
    saved = state_files.rng_tensors()
    torch.manual_seed(6)
    saved["torch_rng_state.rank1"] = torch.get_rng_state()
    expected = torch.rand(2)
    state_files.restore_rng(saved, rank=1)
    assert torch.equal(torch.rand(2), expected)


def test_ema_starts_as_a_copy_then_lags():
    settings = EmaSettings(enable=True, power=0.75)
    assert ema_decay(settings, 1) == 0.0
    assert 0 < ema_decay(settings, 10) < ema_decay(settings, 1000) <= settings.max_decay
    net = model()
    ema = EmaModel(net, settings)
    with torch.no_grad():
        net[0].weight.add_(1.0)
    ema.update(net, 1)
    assert torch.equal(ema.model[0].weight, net[0].weight)
    before = ema.model[0].weight.clone()
    with torch.no_grad():
        net[0].weight.add_(1.0)
    ema.update(net, 50)
    assert (ema.model[0].weight > before).all() and (ema.model[0].weight < net[0].weight).all()


def test_implementation_flags_stay_out_of_the_files(tmp_path):
    spec = OptimizerSpec(type="adamw")
    net = model()
    optimizer = build_optimizer(spec, [{"params": list(net.parameters())}], fused=True)
    step(net, optimizer)
    state_files.save_optimizer(optimizer, tmp_path)
    saved = json.loads((tmp_path / state_files.OPTIMIZER_PARAM_GROUPS).read_text())
    assert saved[0]["fused"] is None  # what LeRobot's own AdamW has: it can resume this
    restored = build_optimizer(spec, [{"params": list(model().parameters())}], fused=True)
    state_files.load_optimizer(restored, tmp_path)
    assert restored.param_groups[0]["fused"] is True
