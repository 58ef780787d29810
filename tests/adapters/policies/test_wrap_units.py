"""Each policy type's FSDP wrap units (`PolicyModel.fsdp_units`), on tiny models.

Fast: the units are submodules, no parameter is in two of them, every repeated layer of the
model lies in one, and in a training step each module of each unit has its `forward` called
(what FSDP gathers a unit on). Two gloo ranks (RLCTL_RANKS_TESTS=1, one torchrun launch for
every type): the sharded run gives the single process's losses and, exported shard by shard,
its weights.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

pytest.importorskip("transformers", reason="the VLA policies need the smolvla extra")

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.policies.checkpoint import untied_state, write_config

from .wrap_unit_cases import CASES

WORKER = Path(__file__).parents[1] / "training" / "policies_sharded_worker.py"


def parts(unit: nn.Module | tuple[nn.Module, ...]) -> tuple[nn.Module, ...]:
    return unit if isinstance(unit, tuple) else (unit,)


def repeated_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The members of each list of two or more modules of one class holding parameters: a
    model's stacked layers (and blocks)."""
    found = []
    for name, child in model.named_modules():
        if not isinstance(child, nn.ModuleList) or len(child) < 2:
            continue
        kinds = {type(member) for member in child}
        if len(kinds) == 1 and kinds != {nn.ModuleList} and any(True for _ in child.parameters()):
            found += [(f"{name}.{i}", member) for i, member in enumerate(child)]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(CASES))
def test_wrap_units_are_disjoint_submodules_holding_the_layers_and_each_runs(
    kind: str, request: pytest.FixtureRequest
) -> None:
    config, batch = CASES[kind](request)
    torch.manual_seed(0)
    model = build_policy(config).train()
    units = model.fsdp_units()
    assert len(units) >= 2, units
    names = {id(module): name for name, module in model.named_modules()}
    owner: dict[int, int] = {}
    for index, unit in enumerate(units):
        for module in parts(unit):
            assert id(module) in names, f"unit {index} is not a submodule: {type(module)}"
            assert module is not model
            for param in module.parameters():
                assert owner.setdefault(id(param), index) == index, (
                    f"{names[id(module)]} shares a parameter with unit {owner[id(param)]}"
                )
    for name, layer in repeated_layers(model):
        outside = [n for n, p in layer.named_parameters() if id(p) not in owner]
        assert not outside, f"{name} is in no unit: {outside[:3]}"

    # FSDP gathers a unit's parameters for the forward of the unit's modules only: each module
    # of a unit must run, and every module computing with a unit's parameters must run inside
    # the forward of the unit's module that holds it.
    holder = {id(sub): id(part) for unit in units for part in parts(unit) for sub in part.modules()}
    ran: set[int] = set()
    running: list[int] = []
    outside: list[str] = []

    def enter(module: nn.Module, _inputs: object) -> None:
        ran.add(id(module))
        running.append(id(module))

    def leave(module: nn.Module, _inputs: object, _output: object) -> None:
        running.remove(id(module))

    def check(module: nn.Module, _inputs: object) -> None:
        if holder[id(module)] not in running and id(module) != holder[id(module)]:
            outside.append(names[id(module)])

    hooks = [
        hook
        for unit in units
        for part in parts(unit)
        for hook in (part.register_forward_pre_hook(enter), part.register_forward_hook(leave))
    ]
    hooks += [
        module.register_forward_pre_hook(check)
        for module in model.modules()
        if id(module) in holder and any(True for _ in module.parameters(recurse=False))
    ]
    try:
        loss, _ = model(batch)
    finally:
        for hook in hooks:
            hook.remove()
    assert torch.isfinite(loss)
    idle = [names[id(m)] for unit in units for m in parts(unit) if id(m) not in ran]
    assert not idle, f"never called in a training step (FSDP would not gather them): {idle[:5]}"
    assert not outside, f"run outside their unit's forward: {sorted(set(outside))[:5]}"


# X-VLA's loss weighs the position error 500-fold: a step of 0.05 takes its loss from 269 to
# 6.4e6, and the weights to thousands, where any rounding difference is a visible one.
LEARNING_RATE = {"xvla": 1e-4}


def reference(
    config: object, batch: dict[str, torch.Tensor], lr: float
) -> tuple[list[float], dict[str, torch.Tensor], int]:
    """One process's losses, trained weights and parameter count (two SGD steps, as a rank)."""
    torch.manual_seed(0)
    model = build_policy(config).train()
    optimiser = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses = []
    for _ in range(2):
        torch.manual_seed(123)
        loss, _ = model(batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.item()))
    weights = {k: v.detach().clone() for k, v in untied_state(model).items()}
    return losses, weights, sum(p.numel() for p in model.parameters())


@pytest.mark.slow
@pytest.mark.ranks
@pytest.mark.timeout(1800)  # six models built, trained and exported in one launch
def test_every_type_on_two_fsdp_ranks_trains_as_one_process(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    cases, expected = [], {}
    # The reference runs on one thread as each rank does: the intra-op threads split a
    # convolution's or a matmul's reductions, so two thread counts give gradients a few ulps
    # apart (X-VLA's vision tower drifted up to 5 % against a two-thread reference, sharded or
    # not: one process on one thread against one on two drifts alike).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for kind, make in CASES.items():
            config, batch = make(request)
            folder = tmp_path / kind
            folder.mkdir()
            save_file(batch, str(folder / "batch.safetensors"))
            write_config(config, folder)
            expected[kind] = reference(config, batch, LEARNING_RATE.get(kind, 0.05))
            cases.append({"kind": kind, "config": str(folder), "out": str(folder / "run"),
                          "lr": LEARNING_RATE.get(kind, 0.05)})  # fmt: skip
    finally:
        torch.set_num_threads(threads)

    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=2", str(WORKER), json.dumps({"cases": cases})]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    for kind, (losses, weights, total) in expected.items():
        out = tmp_path / kind / "run"
        ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
        np.testing.assert_allclose(ranks[0]["losses"], losses, rtol=1e-5, err_msg=kind)
        assert ranks[0]["units"] >= 2
        # Rank 1 built the model on the meta device, its shards filled from rank 0's weights.
        assert (ranks[0]["meta"], ranks[1]["meta"]) == (False, True), kind
        assert ranks[0]["held"] + ranks[1]["held"] == total, kind
        exported = load_file(str(out / "model.safetensors"))
        assert exported.keys() == weights.keys(), kind
        for key, value in weights.items():
            torch.testing.assert_close(
                exported[key],
                value,
                rtol=1e-5,
                atol=1e-6,
                msg=lambda m, k=f"{kind}: {key}": f"{k}: {m}",
            )
