"""Activation checkpointing under FSDP's bf16 mixed precision: the backward pass recomputes each
checkpoint from the inputs the forward pass used, for every policy type with wrap units.

Torch before 2.13 skipped FSDP's input cast when a unit ran again to recompute a checkpoint
(pytorch/pytorch#159359); the first backward of π0 with fsdp, `--use_amp` and activation
checkpointing failed so on an H100. The tests run one gloo process on the CPU with bf16 forced,
on the installed torch and on torch's old behaviour put back (`old_fsdp_recompute`); without
`unit_inputs`' cast the old behaviour fails as the GPU did (the first test).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from torch.utils.checkpoint import CheckpointError

pytest.importorskip("transformers", reason="the VLA policies need the smolvla extra")

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.adapters.training import sharding
from rlctl.adapters.training.distributed import World
from rlctl.adapters.training.precision import Precision
from rlctl.domain.train_settings import DistributedSettings

from .wrap_unit_cases import CASES, Case, tensors

BF16 = Precision(True, torch.bfloat16)


def pi0(request: pytest.FixtureRequest) -> Case:
    from . import test_pi0 as t

    request.getfixturevalue("tiny_paligemma_tokenizer")
    config = t.tiny_config("pi0")
    raw = t.raw_batch()
    raw["action"] = np.random.default_rng(2).normal(size=(2, t.CHUNK, t.ACTION)).astype(np.float32)
    return config, tensors(create_policy(config, t.stats()).preprocessor.process_batch(raw))


def diffusion_recomputing_its_blocks(request: pytest.FixtureRequest) -> Case:
    """Diffusion's own `gradient_checkpointing`: `checkpoint(block, ...)` around each U-Net
    block, a wrap unit, from outside it."""
    config, batch = CASES["diffusion"](request)
    return attrs.evolve(config, gradient_checkpointing=True), batch


TYPES = {"pi0": pi0, **CASES, "diffusion_blocks": diffusion_recomputing_its_blocks}


@pytest.fixture
def one_rank() -> Iterator[World]:
    """A world of this one process (gloo, an in-memory store), on a mesh of one."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("shard",))
        yield World(rank=0, size=1, mesh=mesh)
    finally:
        dist.destroy_process_group()


@pytest.fixture
def old_fsdp_recompute(monkeypatch: pytest.MonkeyPatch) -> None:
    """FSDP2 as torch 2.7-2.12 have it: a unit run again inside the backward pass (to
    recompute a checkpoint) is gathered but its inputs are left as they come."""
    from torch.distributed.fsdp._fully_shard import _fsdp_state
    from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState

    current = _fsdp_state.FSDPState._pre_forward

    @functools.wraps(current)
    def pre_forward(
        self: Any, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self._training_state != TrainingState.PRE_BACKWARD:
            return current(self, module, args, kwargs)
        for group in self._fsdp_param_groups:
            if not group.is_unsharded:
                group.unshard()
                group.wait_for_unshard()
        return args, kwargs

    monkeypatch.setattr(_fsdp_state.FSDPState, "_pre_forward", pre_forward)


def step(world: World, case: Case, *, checkpointing: bool) -> tuple[float, dict[str, torch.Tensor]]:
    """One bf16 forward and backward of the case's model sharded over `world`: the loss and
    every gradient."""
    config, batch = case
    torch.manual_seed(0)
    model = build_policy(config).train()
    settings = DistributedSettings(strategy="fsdp", activation_checkpointing=checkpointing)
    sharding.shard_model(model, world, settings, BF16)
    torch.manual_seed(123)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = model(batch)
    loss.backward()
    grads = {
        name: sharding.full(p.grad).float()
        for name, p in model.named_parameters()
        if p.grad is not None
    }
    return float(loss), grads


@pytest.mark.slow
def test_without_the_cast_old_torch_refuses_the_recomputation_as_the_gpu_did(
    one_rank: World,
    old_fsdp_recompute: None,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sharding, "cast_unit_inputs", lambda *args: None)
    with pytest.raises(CheckpointError, match="different metadata"):
        step(one_rank, pi0(request), checkpointing=True)


@pytest.mark.slow
@pytest.mark.parametrize("torch_behaviour", ["installed", "before_2_13"])
@pytest.mark.parametrize("kind", list(TYPES))
def test_recomputed_checkpoints_give_the_forward_passs_gradients(
    one_rank: World, kind: str, torch_behaviour: str, request: pytest.FixtureRequest
) -> None:
    if torch_behaviour == "before_2_13":
        request.getfixturevalue("old_fsdp_recompute")
    case = TYPES[kind](request)
    loss, grads = step(one_rank, case, checkpointing=False)
    recomputed_loss, recomputed_grads = step(one_rank, case, checkpointing=True)
    assert recomputed_loss == loss
    assert grads.keys() == recomputed_grads.keys() and grads
    for name, grad in grads.items():
        torch.testing.assert_close(recomputed_grads[name], grad, msg=name)
