"""A sharded run's ranks after the first build the model with its parameters on the meta device
(`empty_model`): no storage for them, ties kept, buffers and plain tensors built as usual; a type
that computes with its parameters while built is refused (None: built whole), and the
registration hook is gone afterwards. On two gloo ranks, test_sharded.py and
tests/adapters/policies/test_wrap_units.py train such ranks to the single process's weights."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch
from torch import nn

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.training import sharding
from rlctl.adapters.training.distributed import World
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import ACTConfig

CONFIG: Any = types.SimpleNamespace(type_name="probe")


class Tied(nn.Module):
    def __init__(self, config: object, load_backbone_weights: bool = True) -> None:
        super().__init__()
        assert not load_backbone_weights  # nothing read for a rank that gets rank 0's weights
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight
        self.norm = nn.BatchNorm1d(4)  # persistent buffers
        self.register_buffer("table", torch.arange(3.0), persistent=False)
        self.steps = torch.linspace(0, 1, 5)  # a plain tensor, as a noise scheduler's


class DryRun(nn.Module):
    def __init__(self, config: object, load_backbone_weights: bool = True) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.out = (self.scale * torch.zeros(4)).shape  # an input on the CPU


@pytest.mark.slow  # the first build on the meta device loads torch's meta kernels (~12 s)
def test_parameters_on_meta_ties_kept_buffers_and_plain_tensors_real(monkeypatch) -> None:
    monkeypatch.setattr(sharding, "policy_class", lambda config: Tied)
    model = sharding.empty_model(CONFIG)
    assert model is not None
    assert all(p.is_meta for p in model.parameters())
    assert model.head.weight is model.embed.weight
    assert not any(b.is_meta for b in model.buffers())
    torch.testing.assert_close(model.table, torch.arange(3.0))
    torch.testing.assert_close(model.steps, torch.linspace(0, 1, 5))
    assert nn.Module.register_parameter is sharding.nn.Module.register_parameter
    assert nn.Linear(2, 2).weight.device.type == "cpu"  # the hook is gone


def test_a_type_computing_with_its_weights_while_built_is_built_whole(monkeypatch) -> None:
    monkeypatch.setattr(sharding, "policy_class", lambda config: DryRun)
    warnings = []
    monkeypatch.setattr(sharding.log, "warning", lambda event, **kw: warnings.append(kw))
    assert sharding.empty_model(CONFIG) is None
    assert warnings and warnings[0]["policy"] == "probe"
    assert nn.Linear(2, 2).weight.device.type == "cpu"


@pytest.mark.parametrize(
    "rank,mesh,meta", [(0, "mesh", False), (1, "mesh", True), (1, None, False)]
)
def test_only_sharded_ranks_after_the_first_build_on_meta(rank, mesh, meta) -> None:
    assert sharding.builds_on_meta(World(rank=rank, size=2, mesh=mesh)) is meta


@pytest.mark.slow
def test_act_builds_on_meta_with_the_real_models_names_and_shapes() -> None:
    config = ACTConfig(
        input_features={
            "observation.state": typed_feature("STATE", (6,)),
            "observation.images.top": typed_feature("VISUAL", (3, 32, 32)),
        },
        output_features={"action": typed_feature("ACTION", (6,))},
        chunk_size=4, n_action_steps=4, dim_model=32, n_heads=2, dim_feedforward=64,
        n_encoder_layers=2, n_decoder_layers=1, latent_dim=8, n_vae_encoder_layers=1,
        pretrained_backbone_weights=None,
    )  # fmt: skip
    empty, real = sharding.empty_model(config), build_policy(config)
    assert empty is not None
    assert all(p.is_meta for p in empty.parameters())
    left, right = empty.state_dict(), real.state_dict()
    assert left.keys() == right.keys()
    assert all((left[k].shape, left[k].dtype) == (right[k].shape, right[k].dtype) for k in left)
